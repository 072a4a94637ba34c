import { describe, expect, it } from "vitest";
import { PAGE_LANGUAGES, pageTexts } from "#gateway/preferences/page-texts.js";
import { createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import {
  endpoints,
  operatorTokenOf,
  PROGRAMS,
  STANDALONE_GATEWAY_URL,
  startDaemon,
  startProgram,
  useProgramRoot,
} from "#test/support/processes.js";

const FORM = { "content-type": "application/x-www-form-urlencoded" };

/**
 * The preferences page of a stand-alone gateway whose daemon is down (decisions §5): a visit says,
 * in the visitor's language, that the settings are briefly unavailable and to open the link again
 * in a moment, and a save that the choices were not saved, since nothing was, and to save again
 * in a moment; both keep the 503's Retry-After.
 */
describe("the preferences page while the daemon is down", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-preferences-outage-");

  it("says a visit's settings are briefly unavailable and a save was not saved, each to try again in a moment, not that something went wrong", async () => {
    const dataDir = dirs.join("data");
    const { program: daemon, url: daemonUrl } = await startDaemon(dataDir);
    const gateway = startProgram(PROGRAMS.gateway, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_DAEMON_URL: daemonUrl,
    });
    const service = endpoints({
      daemonUrl,
      gatewayUrl: await gateway.waitFor(STANDALONE_GATEWAY_URL),
      operatorToken: await operatorTokenOf(dataDir),
    });
    const { key } = await mintKey(service, await createTeam(service));
    const { publicId } = await createBanner(service, key);
    const logged = await postLog(service, aChoice(publicId));
    const link = new URL(logged.body.managePreferences).pathname;
    const save = async (headers: Record<string, string> = {}) => {
      const response = await fetch(`${service.gatewayUrl}${link}`, {
        method: "POST",
        headers: { ...FORM, ...headers },
        body: "category=analytics",
        redirect: "manual",
      });
      return { status: response.status, headers: response.headers, text: await response.text() };
    };
    expect((await save()).status).toBe(303);

    expect(await daemon.stop()).toBe(0);
    // The visit's page and the save's: each a 503 HTML page with its own sentence.
    const visit = (headers: Record<string, string> = {}) => http(service, "GET", link, { headers });
    const shown = await visit();
    const failed = await save();
    expect([shown, failed].map((page) => [page.status, page.headers.get("content-type")])).toEqual([
      [503, "text/html; charset=utf-8"],
      [503, "text/html; charset=utf-8"],
    ]);
    // The visit's page: the settings briefly unavailable, so to open the link again in a moment,
    // which it gives, with the 503's Retry-After; no "Something went wrong", which a fault of the service's gets.
    expect(shown.headers.get("retry-after")).toBe("1");
    expect(shown.text).toContain("<title>Your privacy settings are briefly unavailable</title>");
    expect(shown.text).toContain(
      '<h1>Your privacy settings are briefly unavailable</h1>\n<p>This service is briefly unavailable. Wait a moment, then open this link again.</p>\n<p><a href="">Open your privacy settings</a></p></main>',
    );
    expect(shown.text).not.toContain("Something went wrong");
    expect(shown.text).not.toContain("not saved");
    // The save's page: not saved, the service briefly unavailable, so again in a moment from the
    // page it links back to; its title says no more than that (no "Something went wrong"), and
    // the 503 keeps its Retry-After.
    expect(failed.headers.get("retry-after")).toBe("1");
    expect(failed.text).toContain("<title>Your choices were not saved</title>");
    expect(failed.text).toContain(
      '<h1>Your choices were not saved</h1>\n<p>This service is briefly unavailable. Wait a moment, then open your privacy settings and save your choices again.</p>\n<p><a href="">Open your privacy settings</a></p>',
    );
    expect(failed.text).not.toContain("could not be shown");
    // A body that is not the form asks the daemon about the link first: not saved either.
    const notAForm = await save({ "content-type": "text/plain" });
    expect([notAForm.status, notAForm.text.includes("Your choices were not saved")]).toEqual([
      503,
      true,
    ]);

    // In every language the page ships, its own sentence for a save the unavailable service did
    // not make, never the English one.
    const german = await save({ "accept-language": "de-AT, en;q=0.5" });
    expect(german.text).toContain("<title>Ihre Auswahl wurde nicht gespeichert</title>");
    expect(german.text).toContain(
      '<h1>Ihre Auswahl wurde nicht gespeichert</h1>\n<p>Dieser Dienst ist kurzzeitig nicht verfügbar. Warten Sie einen Moment, öffnen Sie dann Ihre Datenschutzeinstellungen und speichern Sie Ihre Auswahl erneut.</p>\n<p><a href="">Ihre Datenschutzeinstellungen öffnen</a></p>',
    );
    const germanVisit = await visit({ "accept-language": "de-AT, en;q=0.5" });
    expect(germanVisit.text).toContain(
      "<h1>Ihre Datenschutzeinstellungen sind kurzzeitig nicht verfügbar</h1>\n<p>Dieser Dienst ist kurzzeitig nicht verfügbar. Warten Sie einen Moment und öffnen Sie diesen Link dann erneut.</p>",
    );
    const english = pageTexts("en").texts.notSaved.because.unavailable;
    const englishVisit = pageTexts("en").texts.unavailable;
    for (const lang of PAGE_LANGUAGES) {
      const { texts } = pageTexts(lang);
      const shownIn = await visit({ "accept-language": lang });
      expect([lang, shownIn.status, shownIn.headers.get("retry-after")]).toEqual([lang, 503, "1"]);
      expect(shownIn.text).toContain(`<html lang="${lang}">`);
      expect(shownIn.text).toContain(`<title>${texts.unavailable[0]}</title>`);
      expect(shownIn.text).toContain(
        `<h1>${texts.unavailable[0]}</h1>\n<p>${texts.unavailable[1]}</p>\n<p><a href="">${texts.openSettings}</a></p></main>`,
      );
      expect(shownIn.text).not.toContain(texts.errors.other[0]);
      if (lang !== "en") {
        expect([lang, englishVisit.some((words) => shownIn.text.includes(words))]).toEqual([
          lang,
          false,
        ]);
      }
      const page = await save({ "accept-language": lang });
      expect([lang, page.status, page.headers.get("retry-after")]).toEqual([lang, 503, "1"]);
      expect(page.text).toContain(`<html lang="${lang}">`);
      expect(page.text).toContain(`<title>${texts.notSaved.title}</title>`);
      expect(page.text).toContain(`<h1>${texts.notSaved.title}</h1>`);
      expect(page.text).toContain(`<p>${texts.notSaved.because.unavailable}</p>`);
      expect(page.text).toContain(`<p><a href="">${texts.openSettings}</a></p>`);
      expect(page.text).not.toContain(texts.errors.other[0]);
      if (lang !== "en") expect([lang, page.text.includes(english)]).toEqual([lang, false]);
    }
    expect(await gateway.stop()).toBe(0);
  });
});
