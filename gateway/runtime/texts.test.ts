import { describe, expect, it } from "vitest";
import type { RuntimeTexts } from "./config.js";
import { directionOf, resolveTexts } from "./texts.js";

/** Texts with only a title, under each of `tags`. */
const titled = (...tags: string[]): Record<string, RuntimeTexts> =>
  Object.fromEntries(tags.map((tag) => [tag, { title: tag }]));
const chosen = (texts: Record<string, RuntimeTexts>, ...wanted: string[]) =>
  resolveTexts(texts, wanted).languageCode;

describe("resolveTexts: which language's texts a page gets", () => {
  it("takes the exact tag, then the tag with its script, then shorter forms", () => {
    expect(chosen(titled("de", "de-AT"), "de-AT")).toBe("de-AT");
    expect(chosen(titled("de"), "de-CH")).toBe("de");
    expect(chosen(titled("sr-Cyrl", "sr-Latn"), "sr-Latn-RS")).toBe("sr-Latn");
    expect(chosen(titled("sr", "sr-Latn"), "sr-Latn-RS")).toBe("sr-Latn");
    // Traditional Chinese where it is written, though the bare tag has texts too.
    for (const page of ["zh-TW", "zh-HK", "zh-Hant"]) {
      expect(chosen(titled("zh", "zh-Hans", "zh-Hant"), page)).toBe("zh-Hant");
    }
    expect(chosen(titled("zh-Hant", "zh-Hans"), "zh-CN")).toBe("zh-Hans");
    expect(chosen(titled("zh-Hant", "zh-Hans"), "zh")).toBe("zh-Hans");
    // A shorter form in another script is passed over: the bare zh is Simplified.
    expect(chosen(titled("zh", "zh-TW"), "zh-HK")).toBe("zh-TW");
    expect(chosen(titled("sr", "sr-Latn-BA"), "sr-Latn-RS")).toBe("sr-Latn-BA");
  });

  it("falls back to the same language in the same script, then to any of that language", () => {
    expect(chosen(titled("pt-BR"), "pt")).toBe("pt-BR");
    expect(chosen(titled("zh-Hans", "zh-Hant"), "zh-MO")).toBe("zh-Hant");
    expect(chosen(titled("sr-Latn"), "sr")).toBe("sr-Latn");
    // Norwegian: texts under "no" serve Bokmål and Nynorsk pages, and the other way round.
    expect(chosen(titled("no"), "nb-NO")).toBe("no");
    expect(chosen(titled("nb"), "no")).toBe("nb");
    // `no` is the macrolanguage: a Nynorsk page takes it before Bokmål, listed first or not.
    expect(chosen(titled("nb", "no"), "nn-NO")).toBe("no");
    expect(chosen(titled("nn", "nb"), "no")).toBe("nb");
  });

  it("fills a string Bokmål or Nynorsk texts lack from no, and one no lacks from nb", () => {
    const texts: Record<string, RuntimeTexts> = {
      en: { acceptAll: "Accept all", save: "Save" },
      no: { title: "Ditt personvern", acceptAll: "Godta alle" },
      nb: { title: "Ditt personvern (bokmål)", save: "Lagre" },
      nn: { title: "Personvernet ditt" },
    };
    const nynorsk = resolveTexts(texts, ["nn-NO"]);
    expect([nynorsk.languageCode, nynorsk.get("acceptAll"), nynorsk.get("save")]).toEqual([
      "nn",
      { text: "Godta alle" },
      { text: "Save", lang: "en" },
    ]);
    const norwegian = resolveTexts(texts, ["no"]);
    expect([norwegian.get("title"), norwegian.get("save")]).toEqual([
      { text: "Ditt personvern" },
      { text: "Lagre" },
    ]);
  });

  it("marks a privacy policy address from another language's texts with that language", () => {
    const texts: Record<string, RuntimeTexts> = {
      fr: { privacyPolicyUrl: "https://shop.example/fr" },
      de: { title: "Datenschutz" },
      "de-AT": { title: "Datenschutz (AT)" },
    };
    const url = (...wanted: string[]) => resolveTexts(texts, wanted).get("privacyPolicyUrl");
    expect(url("de-AT")).toEqual({ text: "https://shop.example/fr", lang: "fr" });
    expect(url("fr-CA")).toEqual({ text: "https://shop.example/fr" });
    expect(url("ja")).toEqual({ text: "https://shop.example/fr", lang: "fr" });
    // Another script is another page for a reader of this one.
    const chinese = { "zh-Hant": { privacyPolicyUrl: "https://shop.example/zh" }, "zh-Hans": {} };
    expect(resolveTexts(chinese, ["zh-CN"]).get("privacyPolicyUrl")).toEqual({
      text: "https://shop.example/zh",
      lang: "zh-Hant",
    });
    const own = { de: { privacyPolicyUrl: "https://shop.example/de" }, "de-AT": {} };
    expect(resolveTexts(own, ["de-AT"]).get("privacyPolicyUrl")).toEqual({
      text: "https://shop.example/de",
    });
    const english = { en: { privacyPolicyUrl: "https://shop.example/en" }, it: {} };
    expect(resolveTexts(english, ["it"]).get("privacyPolicyUrl")).toEqual({
      text: "https://shop.example/en",
      lang: "en",
    });
  });

  it("fills a string the chosen texts lack from their shorter forms, then from English", () => {
    const texts: Record<string, RuntimeTexts> = {
      en: { title: "Privacy", save: "Save" },
      de: { title: "Datenschutz", acceptAll: "Alle akzeptieren" },
      "de-AT": { title: "Datenschutz (AT)" },
      zh: { acceptAll: "全部接受" },
      "zh-Hant": { title: "隱私" },
      "zh-TW": { customize: "自訂" },
    };
    const austrian = resolveTexts(texts, ["de-AT"]);
    expect(austrian.languageCode).toBe("de-AT");
    expect(austrian.get("title")).toEqual({ text: "Datenschutz (AT)" });
    expect(austrian.get("acceptAll")).toEqual({ text: "Alle akzeptieren" });
    expect(austrian.get("save")).toEqual({ text: "Save", lang: "en" });
    expect(austrian.get("rejectAll")).toEqual({ text: "Reject all", lang: "en" });
    // Never a shorter form in another script: the bare zh is Simplified.
    const taiwanese = resolveTexts(texts, ["zh-TW"]);
    expect(taiwanese.languageCode).toBe("zh-TW");
    expect(taiwanese.get("customize")).toEqual({ text: "自訂" });
    expect(taiwanese.get("title")).toEqual({ text: "隱私" });
    expect(taiwanese.get("acceptAll")).toEqual({ text: "Accept all", lang: "en" });
  });

  it("follows the wanted languages in order, any case, English when none has texts", () => {
    expect(chosen(titled("fr", "de"), "it", "DE-de", "fr")).toBe("de");
    expect(chosen(titled("fr"), "it")).toBe("en");
    expect(chosen(titled("fr"), "not a tag", "fr-CA")).toBe("fr");
  });

  it("reads a POSIX locale as the tag it names, recording the texts' own tag", () => {
    expect(chosen(titled("de", "de-AT"), "de_AT")).toBe("de-AT");
    expect(chosen(titled("de", "de-AT"), "de_AT.UTF-8")).toBe("de-AT");
    expect(chosen(titled("de"), "de_AT@euro")).toBe("de");
    expect(chosen(titled("zh-Hant"), "zh_TW.Big5")).toBe("zh-Hant");
    expect(directionOf("ar_EG.UTF-8")).toBe("rtl");
  });

  it("reads a POSIX modifier naming a script as the script, one shaped as a variant as the variant", () => {
    expect(chosen(titled("sr", "sr-Latn"), "sr_RS@latin")).toBe("sr-Latn");
    expect(chosen(titled("sr", "sr-Latn"), "sr@latin")).toBe("sr-Latn");
    expect(chosen(titled("sr", "sr-Latn"), "sr_RS.UTF-8@latin")).toBe("sr-Latn");
    expect(chosen(titled("sr", "sr-Latn"), "sr_RS")).toBe("sr");
    expect(chosen(titled("uz", "uz-Cyrl"), "uz_UZ@cyrillic")).toBe("uz-Cyrl");
    expect(chosen(titled("ca", "ca-ES-valencia"), "ca_ES@valencia")).toBe("ca-ES-valencia");
    expect(chosen(titled("de"), "de_DE@euro")).toBe("de");
    expect(chosen(titled("de"), "de_DE@constructor")).toBe("de");
    // Kashmiri is written in Arabic script, right to left, unless in Devanagari.
    expect(directionOf("ks_IN")).toBe("rtl");
    expect(directionOf("ks_IN@devanagari")).toBe("ltr");
  });
});

describe("directionOf", () => {
  it("reads the direction from the script the tag names, else the one the language is written in", () => {
    for (const rtl of ["ar", "ar-EG", "he", "fa", "ur", "ckb", "dv", "yi", "syr", "ku-Arab"]) {
      expect([rtl, directionOf(rtl)]).toEqual([rtl, "rtl"]);
    }
    for (const rtl of ["pa-Arab", "uz-Arab", "ff-Adlm", "sd"]) {
      expect([rtl, directionOf(rtl)]).toEqual([rtl, "rtl"]);
    }
    for (const ltr of ["en", "de-AT", "sd-Deva", "ku", "pa", "zh-Hant", "az-Latn"]) {
      expect([ltr, directionOf(ltr)]).toEqual([ltr, "ltr"]);
    }
    expect(directionOf("ur-Aran")).toBe("rtl");
  });

  it("falls back to the language where the browser has no Intl.Locale", () => {
    const intl = Intl as { Locale?: typeof Intl.Locale };
    const locale = intl.Locale;
    delete intl.Locale;
    try {
      for (const rtl of ["ar-SA", "he-IL", "fa-AF", "ks-Arab-IN"]) {
        expect([rtl, directionOf(rtl)]).toEqual([rtl, "rtl"]);
      }
      for (const ltr of ["en-NZ", "sd-Deva-IN", "de-LI"]) {
        expect([ltr, directionOf(ltr)]).toEqual([ltr, "ltr"]);
      }
      expect(chosen(titled("pt-BR", "fr"), "pt-AO")).toBe("pt-BR");
      expect(chosen(titled("es"), "es-UY")).toBe("es");
    } finally {
      intl.Locale = locale;
    }
  });
});
