import { describe, expect, it } from "vitest";
import {
  categoriesDrawn,
  dialog,
  mixedDirections,
  openPage,
  type SitePage,
  showPreferences,
  skipBrowserTests,
  useBrowserSite,
  waitForRows,
} from "#test/support/browser.js";
import { bannerFixture, labelledCategories } from "#test/support/consent-log.js";

/** Which texts a visitor gets, as the page and the browser name languages (docs/banner-runtime.md). */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: the texts' language", () => {
  const ctx = useBrowserSite();

  /**
   * A visitor whose browser speaks `locale` opens a page of a fresh banner with `texts`, and
   * accepts all: the banner's dialog and the row the choice made.
   */
  async function acceptAllAs(
    locale: string,
    texts: Record<string, Record<string, string>>,
    page: Omit<SitePage, "publicId">,
  ) {
    const { teamId, publicId } = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories: labelledCategories, texts },
    });
    const visitor = await openPage(ctx.browser, { locale });
    try {
      await visitor.page.goto(ctx.site.page(`/languages-${publicId}`, { publicId, ...page }));
      const panel = dialog(visitor.page);
      await expect.poll(() => panel.count()).toBe(1);
      const shown = {
        title: await panel.getByRole("heading").textContent(),
        lang: await visitor.page.locator("[id^=consent-banner-] .r").getAttribute("lang"),
        links: await panel
          .getByRole("link")
          .evaluateAll((links) =>
            links.map((link) => [
              link.textContent,
              link.getAttribute("href"),
              link.getAttribute("hreflang"),
            ]),
          ),
      };
      await panel.getByRole("button").first().click();
      const [row] = await waitForRows(ctx.service, teamId, 1);
      return { ...shown, row, warnings: visitor.warnings };
    } finally {
      await visitor.context.close();
    }
  }

  /**
   * What a page of each of `langs` (`<html lang>`) shows, in a browser speaking English only, of
   * one fresh banner with `texts`: the texts' language, the title, and Accept all with its own
   * language mark.
   */
  async function shownOn(langs: string[], texts: Record<string, Record<string, string>>) {
    const { publicId } = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories: labelledCategories, texts },
    });
    const visitor = await openPage(ctx.browser, { locale: "en-US" });
    try {
      const shown: string[][] = [];
      for (const lang of langs) {
        await visitor.page.goto(ctx.site.page(`/shown-${publicId}`, { publicId, lang }));
        const panel = dialog(visitor.page);
        await expect.poll(() => panel.count()).toBe(1);
        const accept = panel.getByRole("button").first();
        shown.push([
          lang,
          (await visitor.page.locator("[id^=consent-banner-] .r").getAttribute("lang")) ?? "",
          (await panel.getByRole("heading").textContent()) ?? "",
          (await accept.textContent()) ?? "",
          (await accept.getAttribute("lang")) ?? "",
        ]);
      }
      expect(visitor.warnings).toEqual([]);
      return shown;
    } finally {
      await visitor.context.close();
    }
  }

  /**
   * shownOn's rows where the texts translate only the title: the button is the built-in English,
   * marked as such.
   */
  const titleOnly = (rows: [lang: string, code: string, title: string][]) =>
    rows.map((row) => [...row, "Accept all", "en"]);

  it("reads a page's POSIX locale (de_AT, de_AT.UTF-8, de_AT@euro) as its language tag", async () => {
    const texts = {
      de: { title: "Ihre Privatsphäre", acceptAll: "Alle akzeptieren" },
      "de-AT": { title: "Ihre Privatsphäre in Österreich" },
    };
    for (const lang of ["de_AT", "de_AT.UTF-8", "de_at@euro"]) {
      const seen = await acceptAllAs("en-US", texts, { lang });
      // The Austrian texts, in the canonical tag the row records, not the page's spelling.
      expect([lang, seen.title, seen.lang, seen.row?.languageCode]).toEqual([
        lang,
        "Ihre Privatsphäre in Österreich",
        "de-AT",
        "de-AT",
      ]);
    }
    // Only German texts: the Swiss page finds them, not the browser's English.
    const swiss = await acceptAllAs("en-US", { de: texts.de }, { lang: "de_CH.UTF-8" });
    expect([swiss.title, swiss.lang, swiss.row?.languageCode]).toEqual([
      "Ihre Privatsphäre",
      "de",
      "de",
    ]);
  });

  it("keeps the operator's privacy policy link where the visitor gets built-in English", async () => {
    const texts = {
      fr: {
        title: "Votre vie privée",
        privacyPolicyUrl: "https://shop.example.com/fr/confidentialite",
        privacyPolicyLabel: "Politique de confidentialité",
      },
      de: { title: "Ihre Privatsphäre", privacyPolicyUrl: "https://shop.example.com/datenschutz" },
      it: { title: "La tua privacy" },
    };
    // None of the visitor's languages has texts, and there are no English ones: the banner is
    // built-in English, with the link of the configuration's first language that has one.
    const japanese = await acceptAllAs("ja-JP", texts, { lang: "ja" });
    expect([japanese.title, japanese.lang, japanese.row?.languageCode]).toEqual([
      "We value your privacy",
      "en",
      "en",
    ]);
    // The link is to a page in another language than the banner's: it says which (hreflang).
    expect(japanese.links).toEqual([
      ["Privacy policy", "https://shop.example.com/fr/confidentialite", "fr"],
    ]);
    // Texts of the visitor's language without a link of their own get it the same way.
    const italian = await acceptAllAs("it-IT", texts, { lang: "it" });
    expect([italian.title, italian.row?.languageCode]).toEqual(["La tua privacy", "it"]);
    expect(italian.links).toEqual([
      ["Privacy policy", "https://shop.example.com/fr/confidentialite", "fr"],
    ]);
    // Texts with a link of their own keep it, in their language.
    const german = await acceptAllAs("de-DE", texts, { lang: "de" });
    expect(german.links).toEqual([
      ["Privacy policy", "https://shop.example.com/datenschutz", null],
    ]);
    expect(japanese.warnings.concat(italian.warnings, german.warnings)).toEqual([]);
  });

  it("says which language the privacy policy is in where the link comes from another language's texts", async () => {
    const texts = {
      en: { privacyPolicyUrl: "https://shop.example.com/privacy" },
      de: { title: "Ihre Privatsphäre", privacyPolicyUrl: "https://shop.example.com/datenschutz" },
      "de-AT": { title: "Ihre Privatsphäre in Österreich" },
      fr: { title: "Votre vie privée" },
    };
    const seen = [];
    for (const lang of ["fr", "de-AT", "ja"]) {
      const { title, links, warnings } = await acceptAllAs("en-US", texts, { lang });
      seen.push([lang, title, links, warnings]);
    }
    expect(seen).toEqual([
      // The operator's English link on a French banner.
      [
        "fr",
        "Votre vie privée",
        [["Privacy policy", "https://shop.example.com/privacy", "en"]],
        [],
      ],
      // German's link on the Austrian banner: the same language, nothing to say.
      [
        "de-AT",
        "Ihre Privatsphäre in Österreich",
        [["Privacy policy", "https://shop.example.com/datenschutz", null]],
        [],
      ],
      // The operator's English banner with its own link.
      [
        "ja",
        "We value your privacy",
        [["Privacy policy", "https://shop.example.com/privacy", null]],
        [],
      ],
    ]);
  });

  it("counts Norwegian's no, nb and nn as one language, no being the other two's macrolanguage", async () => {
    const norwegian = { title: "Ditt personvern", acceptAll: "Godta alle" };
    const german = { title: "Ihre Privatsphäre", acceptAll: "Alle akzeptieren" };
    // Texts under `no` serve a Bokmål or Nynorsk page, however the page writes its tag.
    expect(
      await shownOn(["nb", "nb-NO", "nn", "nn_NO.UTF-8", "no"], { de: german, no: norwegian }),
    ).toEqual([
      ["nb", "no", "Ditt personvern", "Godta alle", ""],
      ["nb-NO", "no", "Ditt personvern", "Godta alle", ""],
      ["nn", "no", "Ditt personvern", "Godta alle", ""],
      ["nn_NO.UTF-8", "no", "Ditt personvern", "Godta alle", ""],
      ["no", "no", "Ditt personvern", "Godta alle", ""],
    ]);
    // And texts under `nb` a page that says only `no`.
    expect(await shownOn(["no", "no-NO"], { de: german, nb: norwegian })).toEqual([
      ["no", "nb", "Ditt personvern", "Godta alle", ""],
      ["no-NO", "nb", "Ditt personvern", "Godta alle", ""],
    ]);
    // A string Bokmål or Nynorsk texts leave out is Norwegian's (`no`), not English; one `no`
    // leaves out is Bokmål's, the way `no` is written.
    const english = { title: "Your privacy", acceptAll: "Accept all" };
    const bokmal = { title: "Ditt personvern (bokmål)" };
    const nynorsk = { title: "Personvernet ditt" };
    expect(
      await shownOn(["nb-NO", "nn-NO"], { en: english, no: norwegian, nb: bokmal, nn: nynorsk }),
    ).toEqual([
      ["nb-NO", "nb", "Ditt personvern (bokmål)", "Godta alle", ""],
      ["nn-NO", "nn", "Personvernet ditt", "Godta alle", ""],
    ]);
    // A Nynorsk page takes `no` before `nb`, though `nb` comes first in the configuration.
    const texts = {
      en: english,
      nb: { ...bokmal, acceptAll: "Godta alle" },
      no: { title: "Ditt personvern" },
    };
    expect(await shownOn(["no", "nn"], texts)).toEqual([
      ["no", "no", "Ditt personvern", "Godta alle", ""],
      ["nn", "no", "Ditt personvern", "Godta alle", ""],
    ]);
  });

  it("matches the tags browsers still send for a language under its current one", async () => {
    const texts = {
      he: { title: "הפרטיות שלך" },
      id: { title: "Privasi Anda" },
      yi: { title: "אייער פּריוואַטקייט" },
      fil: { title: "Ang iyong privacy" },
      ro: { title: "Confidențialitatea dvs." },
      "zh-Hans": { title: "您的隐私" },
      "zh-Hant": { title: "您的隱私" },
    };
    const shown = await shownOn(
      ["iw", "in", "ji", "tl", "mo", "zh-CN", "zh-SG", "zh-HK", "zh-MO"],
      texts,
    );
    expect(shown).toEqual(
      titleOnly([
        ["iw", "he", "הפרטיות שלך"],
        ["in", "id", "Privasi Anda"],
        ["ji", "yi", "אייער פּריוואַטקייט"],
        ["tl", "fil", "Ang iyong privacy"],
        ["mo", "ro", "Confidențialitatea dvs."],
        ["zh-CN", "zh-Hans", "您的隐私"],
        ["zh-SG", "zh-Hans", "您的隐私"],
        ["zh-HK", "zh-Hant", "您的隱私"],
        ["zh-MO", "zh-Hant", "您的隱私"],
      ]),
    );
  });

  it("reads the script a POSIX locale's modifier names (sr_RS@latin is sr-Latn-RS)", async () => {
    const texts = {
      sr: { title: "Ваша приватност" },
      "sr-Latn": { title: "Vaša privatnost" },
      uz: { title: "Maxfiyligingiz" },
      "uz-Cyrl": { title: "Махфийлигингиз" },
      ca: { title: "La vostra privadesa" },
      "ca-ES-valencia": { title: "La vostra privacitat" },
    };
    const shown = await shownOn(
      [
        "sr_RS@latin",
        "sr_RS.UTF-8@latin",
        "sr_RS",
        "uz_UZ@cyrillic",
        "uz_UZ",
        "ca_ES@valencia",
        "ca_ES@euro",
      ],
      texts,
    );
    expect(shown).toEqual(
      titleOnly([
        ["sr_RS@latin", "sr-Latn", "Vaša privatnost"],
        ["sr_RS.UTF-8@latin", "sr-Latn", "Vaša privatnost"],
        ["sr_RS", "sr", "Ваша приватност"],
        ["uz_UZ@cyrillic", "uz-Cyrl", "Махфийлигингиз"],
        ["uz_UZ", "uz", "Maxfiyligingiz"],
        ["ca_ES@valencia", "ca-ES-valencia", "La vostra privacitat"],
        ["ca_ES@euro", "ca", "La vostra privadesa"],
      ]),
    );
  });

  // Regression: a category's own label and description, in no stated language, took the banner's
  // direction: in a Hebrew banner an English description or label ended in a full stop drawn at
  // its left (".Sign-in and basket"), in an English banner a Hebrew description at its right.
  it("draws a category's own label and description in their own direction, whatever the banner's", async () => {
    const { publicId } = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: mixedDirections.configuration,
    });
    const visitor = await openPage(ctx.browser, { locale: "en-US" });
    const drawn = [];
    for (const lang of ["he", "en"]) {
      await visitor.page.goto(ctx.site.page(`/directions-${lang}`, { publicId, lang }));
      await visitor.page.waitForFunction(() => "consentBanner" in window);
      await showPreferences(visitor.page);
      const panel = dialog(visitor.page);
      await expect.poll(() => panel.locator("label small").count()).toBe(2);
      drawn.push(await categoriesDrawn(visitor.page.locator("[id^=consent-banner-] .r"), panel));
    }
    await visitor.context.close();
    expect(drawn).toEqual(mixedDirections.drawn);
  });
});
