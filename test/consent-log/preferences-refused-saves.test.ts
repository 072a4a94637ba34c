import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PAGE_LANGUAGES, pageTexts } from "#gateway/preferences/page-texts.js";
import { http, rawHttp } from "#test/support/api.js";
import {
  aChoice,
  alteredLink,
  bannerFixture,
  ipSource,
  labelledCategories,
  postLog,
  storedRows,
  useVisitorService,
} from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

const configuration = { categories: labelledCategories };

/** The title, then what the visitor reads of a page: its heading, paragraphs and links. */
function shown(html: string) {
  return {
    title: /<title>(.*)<\/title>/.exec(html)?.[1],
    main: /<main>([\s\S]*)<\/main>/.exec(html)?.[1],
  };
}

/**
 * decisions §5: a save the service refused says so outright, in the page's language, then why in
 * words a visitor understands, and links back to the settings page only where saving again from
 * it can succeed. Nothing is recorded.
 */
describe("the page of a save the service refused", () => {
  const ctx = useVisitorService("2026-11-22T12:00:00.000Z");
  const ip = ipSource();

  async function linkFor(publicId: string) {
    const result = await postLog(ctx.service, aChoice(publicId), { ip: ip() });
    return new URL(result.body.managePreferences).pathname;
  }

  function submit(path: string, headers: Record<string, string> = {}) {
    return http(ctx.service, "POST", path, {
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: "category=marketing",
    });
  }

  it("says an expired or altered link's save was not saved, and why, with no link back", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const before = await storedRows(ctx.service, teamId);

    const invalid = await submit(alteredLink(path));
    expect([invalid.status, shown(invalid.text)]).toEqual([
      403,
      {
        title: "Your choices were not saved – This link is not valid",
        main: "<h1>Your choices were not saved</h1>\n<p>This link is not valid. It may have been copied incompletely or changed. Open the site again and change your choices from its privacy settings.</p>",
      },
    ]);

    ctx.clock.now += 30 * 60_000;
    try {
      const expired = await submit(path, { "accept-language": "de-CH, en;q=0.5" });
      expect([expired.status, shown(expired.text)]).toEqual([
        403,
        {
          title: "Ihre Auswahl wurde nicht gespeichert – Dieser Link ist abgelaufen",
          main: "<h1>Ihre Auswahl wurde nicht gespeichert</h1>\n<p>Dieser Link ist abgelaufen. Links zum Ändern Ihrer Datenschutzauswahl sind nach einer Auswahl 30 Minuten lang gültig. Öffnen Sie die Website erneut und ändern Sie Ihre Auswahl in deren Datenschutzeinstellungen.</p>",
        },
      ]);
      // A visit to the same link keeps the visit's page: nothing was submitted.
      const visit = await http(ctx.service, "GET", path);
      expect([visit.status, shown(visit.text).title]).toEqual([403, "This link has expired"]);
    } finally {
      ctx.clock.now -= 30 * 60_000;
    }
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });

  it("says a save for a banner no longer active was not saved, and why, with no link back", async () => {
    const { teamId, key, id, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    await http(ctx.service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    const before = await storedRows(ctx.service, teamId);

    const save = await submit(path, { "accept-language": "fr" });
    expect([save.status, shown(save.text)]).toEqual([
      404,
      {
        title:
          "Vos choix n’ont pas été enregistrés – Ces paramètres de confidentialité ne sont plus disponibles",
        main: "<h1>Vos choix n’ont pas été enregistrés</h1>\n<p>Ces paramètres de confidentialité ne sont plus disponibles. Le site ne recueille plus de choix avec cette bannière.</p>",
      },
    ]);
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });

  it("says a form another site sent was not saved, why, and links back to the settings page", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const before = await storedRows(ctx.service, teamId);

    const refused = await submit(path, { "sec-fetch-site": "cross-site" });
    expect([refused.status, shown(refused.text)]).toEqual([
      403,
      {
        title: "Your choices were not saved",
        main: '<h1>Your choices were not saved</h1>\n<p>Choices are saved only from the privacy settings page itself, so that another website cannot change them for you. Open your privacy settings and save your choices there.</p>\n<p><a href="">Open your privacy settings</a></p>',
      },
    ]);
    const polish = await submit(path, {
      origin: "https://attacker.example",
      "accept-language": "pl",
    });
    expect([polish.status, shown(polish.text)]).toEqual([
      403,
      {
        title: "Twoje wybory nie zostały zapisane",
        main: '<h1>Twoje wybory nie zostały zapisane</h1>\n<p>Wybory są zapisywane tylko z samej strony ustawień prywatności, aby żadna inna witryna nie mogła ich zmienić za Ciebie. Otwórz ustawienia prywatności i zapisz tam swoje wybory.</p>\n<p><a href="">Otwórz ustawienia prywatności</a></p>',
      },
    ]);
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });

  it("says a submission that is not the page's form was not saved, because only the page itself sends the form, and links back", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const before = await storedRows(ctx.service, teamId);

    const plain = await submit(path, { "content-type": "text/plain" });
    expect([plain.status, shown(plain.text)]).toEqual([
      415,
      {
        title: "Your choices were not saved",
        main: '<h1>Your choices were not saved</h1>\n<p>What was sent was not the form of the privacy settings page. Choices are saved only when that form is sent from the page itself. Open your privacy settings and save your choices there.</p>\n<p><a href="">Open your privacy settings</a></p>',
      },
    ]);
    const spanish = await submit(path, {
      "content-type": "application/json",
      "accept-language": "es-MX",
    });
    expect([spanish.status, shown(spanish.text)]).toEqual([
      415,
      {
        title: "Sus opciones no se han guardado",
        main: '<h1>Sus opciones no se han guardado</h1>\n<p>Lo que se ha enviado no es el formulario de la página de configuración de privacidad. Las opciones solo se guardan cuando ese formulario se envía desde la propia página. Abra su configuración de privacidad y guarde allí sus opciones.</p>\n<p><a href="">Abrir su configuración de privacidad</a></p>',
      },
    ]);
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });

  // Regression: a save sent with another method, one too large and one whose framing could not be
  // read all said that what was sent was not the page's form, the 415's sentence.
  it("says a save of another method, one too large and one unreadable was not saved, each saying what happened, and links back", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const before = await storedRows(ctx.service, teamId);
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const refusals = {
      method_not_allowed: (lang: string) =>
        rawHttp(ctx.service, "PUT", path, { ...form, "accept-language": lang }, "category=x"),
      body_too_large: (lang: string) =>
        http(ctx.service, "POST", path, {
          headers: { ...form, "accept-language": lang },
          body: `category=${"x".repeat(1024 * 1024)}`,
        }),
      // A transfer coding the gateway does not implement: a body it cannot read.
      invalid_request: (lang: string) =>
        rawHttp(
          ctx.service,
          "POST",
          path,
          { ...form, "accept-language": lang, "transfer-encoding": "gzip, chunked" },
          "category=x",
        ),
    } as const;

    const english = {
      method_not_allowed: [
        405,
        "This page saves your choices only through its own form. Open your privacy settings and save your choices there.",
      ],
      body_too_large: [
        413,
        "What was sent was too large for the privacy settings form. Open your privacy settings and save your choices there.",
      ],
      invalid_request: [
        400,
        "The content of the form that was sent was not valid. Open your privacy settings and save your choices there.",
      ],
    } as const;
    for (const [failure, [status, text]] of Object.entries(english)) {
      const page = await refusals[failure as keyof typeof refusals]("en");
      expect([failure, page.status, page.headers.get("content-type"), shown(page.text)]).toEqual([
        failure,
        status,
        "text/html; charset=utf-8",
        {
          title: "Your choices were not saved",
          main: `<h1>Your choices were not saved</h1>\n<p>${text}</p>\n<p><a href="">Open your privacy settings</a></p>`,
        },
      ]);
    }
    const put = await refusals.method_not_allowed("de");
    expect([put.headers.get("allow"), shown(put.text).main]).toEqual([
      "GET, POST, HEAD",
      '<h1>Ihre Auswahl wurde nicht gespeichert</h1>\n<p>Diese Seite speichert Ihre Auswahl nur über ihr eigenes Formular. Öffnen Sie Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl dort.</p>\n<p><a href="">Ihre Datenschutzeinstellungen öffnen</a></p>',
    ]);

    // In every language the page ships, a sentence of its own for each, none the 415's.
    for (const lang of PAGE_LANGUAGES) {
      const { texts } = pageTexts(lang);
      for (const failure of Object.keys(refusals) as (keyof typeof refusals)[]) {
        const text = texts.notSaved.because[failure];
        const page = await refusals[failure](lang);
        expect([lang, failure, page.status, shown(page.text)]).toEqual([
          lang,
          failure,
          english[failure][0],
          {
            title: texts.notSaved.title,
            main: `<h1>${texts.notSaved.title}</h1>\n<p>${text}</p>\n<p><a href="">${texts.openSettings}</a></p>`,
          },
        ]);
        expect(page.text).toContain(`<html lang="${lang}">`);
        const others = [texts.notSaved.because.unsupported_form];
        if (lang !== "en") others.push(english[failure][1]);
        expect([lang, failure, others.includes(text)]).toEqual([lang, failure, false]);
      }
    }
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });
});

/**
 * decisions §5, spec 7: a save the service failed to make (500, its store broken underneath) says
 * it was not saved and that something went wrong on the service's side, in the page's language,
 * with the link back to try again later; a visit keeps its own page.
 */
describe("the page of a save the service failed to make", () => {
  let service: TestService;
  let path: string;

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    const { publicId } = await bannerFixture(service, { configuration });
    const logged = await postLog(service, aChoice(publicId));
    path = new URL(logged.body.managePreferences).pathname;
    await service.store.close();
  });
  afterAll(() => service?.close().catch(() => undefined));

  function submit(headers: Record<string, string> = {}) {
    return http(service, "POST", path, {
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: "category=marketing",
    });
  }

  it("says the choices were not saved because of a fault on the service's side, and links back", async () => {
    const failed = await submit();
    expect([failed.status, shown(failed.text)]).toEqual([
      500,
      {
        title: "Your choices were not saved – Something went wrong",
        main: '<h1>Your choices were not saved</h1>\n<p>Something went wrong on this service’s side. Open your privacy settings and try again later.</p>\n<p><a href="">Open your privacy settings</a></p>',
      },
    ]);
    const italian = await submit({ "accept-language": "it" });
    expect([italian.status, shown(italian.text)]).toEqual([
      500,
      {
        title: "Le tue scelte non sono state salvate – Si è verificato un problema",
        main: '<h1>Le tue scelte non sono state salvate</h1>\n<p>Si è verificato un problema da parte di questo servizio. Apri le tue impostazioni sulla privacy e riprova più tardi.</p>\n<p><a href="">Apri le tue impostazioni sulla privacy</a></p>',
      },
    ]);
    const visit = await http(service, "GET", path);
    expect([visit.status, shown(visit.text).title]).toEqual([500, "Something went wrong"]);
  });

  // Regression: a visit's page said only that the settings could not be shown just now, leaving
  // the visitor to wonder whether the link or something they did was at fault; and it told them
  // to try again later with no link to try from, where the briefly unavailable service's page
  // gives one.
  it("says a visit's settings could not be shown because of a fault on the service's side, not the visitor's, and links to the page to try again", async () => {
    const visit = (lang?: string) =>
      http(service, "GET", path, { headers: lang ? { "accept-language": lang } : {} });
    const english = await visit();
    expect([english.status, shown(english.text)]).toEqual([
      500,
      {
        title: "Something went wrong",
        main: '<h1>Something went wrong</h1>\n<p>Something went wrong on this service’s side, not yours. Your privacy settings could not be shown just now. Please try again later.</p>\n<p><a href="">Open your privacy settings</a></p>',
      },
    ]);
    const german = await visit("de-CH, en;q=0.5");
    expect([german.status, shown(german.text)]).toEqual([
      500,
      {
        title: "Etwas ist schiefgelaufen",
        main: '<h1>Etwas ist schiefgelaufen</h1>\n<p>Bei diesem Dienst ist ein Fehler aufgetreten, nicht bei Ihnen. Ihre Datenschutzeinstellungen können gerade nicht angezeigt werden. Bitte versuchen Sie es später erneut.</p>\n<p><a href="">Ihre Datenschutzeinstellungen öffnen</a></p>',
      },
    ]);
    // In every language the page ships, its own sentence, never the English one, and the link
    // to the page to try again from.
    const englishText = pageTexts("en").texts.errors.other[1];
    for (const lang of PAGE_LANGUAGES) {
      const { texts } = pageTexts(lang);
      const [title, text] = texts.errors.other;
      const page = await visit(lang);
      expect([lang, page.status, shown(page.text)]).toEqual([
        lang,
        500,
        {
          title,
          main: `<h1>${title}</h1>\n<p>${text}</p>\n<p><a href="">${texts.openSettings}</a></p>`,
        },
      ]);
      expect(page.text).toContain(`<html lang="${lang}">`);
      if (lang !== "en") expect([lang, text === englishText]).toEqual([lang, false]);
    }
  });
});
