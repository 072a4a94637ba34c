import type { RuntimeCategory, RuntimeTexts } from "./config.js";

/** The English fallback of every visible string; the banner and the preferences page share it. */
export const DEFAULT_TEXTS = {
  title: "We value your privacy",
  description:
    "We use cookies and similar technologies to run this site, to measure its use and to personalise content and ads. Choose what you allow.",
  acceptAll: "Accept all",
  rejectAll: "Reject all",
  customize: "Customize",
  save: "Save choices",
  privacyPolicyUrl: "",
  privacyPolicyLabel: "Privacy policy",
  alwaysOnLabel: "Always on",
};

export type TextKey = keyof typeof DEFAULT_TEXTS;

/** Texts of one language with the fallbacks applied, and the language they are in. */
export interface ResolvedTexts {
  languageCode: string;
  get(key: TextKey): string;
  category(category: RuntimeCategory): { label: string; description: string };
}

/**
 * Picks the texts for the wanted languages, in order (the page's `<html lang>`, then the
 * browser's languages): for each, the exact tag, else its primary subtag, else another tag of
 * that language (`pt` finds `pt-BR`); English when none has texts. Each field falls back on its
 * own, to the operator's English text and then to DEFAULT_TEXTS, so a half-translated banner
 * still shows every string.
 */
export function resolveTexts(
  texts: Record<string, RuntimeTexts>,
  wanted: readonly string[],
): ResolvedTexts {
  const keys = Object.keys(texts);
  const primary = (tag: string) => tag.split("-")[0];
  const find = (matches: (key: string) => boolean) => keys.find((key) => matches(comparable(key)));
  let lang: string | undefined;
  for (const tag of wanted.filter(Boolean).map(comparable)) {
    lang ??=
      find((key) => key === tag) ??
      find((key) => key === primary(tag)) ??
      find((key) => primary(key) === primary(tag));
  }
  // Found, not texts.en: the daemon stores "en", but a banner saved before it did may say "EN".
  const chain = [lang, find((key) => key === "en")].flatMap((key) =>
    key === undefined ? [] : [texts[key] ?? {}],
  );
  return {
    languageCode: lang ?? "en",
    get: (key) => chain.map((t) => t[key]).find(Boolean) || DEFAULT_TEXTS[key],
    category: (category) => {
      const own = chain.map((t) => t.categories?.[category.name]);
      return {
        label: own.map((t) => t?.label).find(Boolean) || category.label || category.name,
        description: own.map((t) => t?.description).find(Boolean) || category.description,
      };
    },
  };
}

/**
 * A language tag as texts are matched: canonical BCP 47 in lower case, so any case matches and a
 * deprecated tag matches its replacement ("iw" a key the daemon stored as "he"). A page's tag
 * Intl cannot read is compared as written.
 */
function comparable(tag: string): string {
  try {
    return (Intl.getCanonicalLocales(tag)[0] ?? tag).toLowerCase();
  } catch (error) {
    if (error instanceof RangeError) return tag.toLowerCase();
    throw error;
  }
}
