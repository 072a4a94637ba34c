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
  servicesLabel: "Services",
};

export type TextKey = keyof typeof DEFAULT_TEXTS;

/**
 * One visible string, with its own language when that is not the texts' language: an English
 * fallback in a banner shown in German says so (WCAG 3.1.2, language of parts).
 */
export interface Text {
  text: string;
  lang?: string;
  /**
   * In no stated language (a category's own label or description): drawn in its own direction
   * (`dir="auto"`), so an English description keeps its full stop at its end in a Hebrew banner.
   */
  unstated?: true;
}

/** Texts of one language with the fallbacks applied, and the language they are in. */
export interface ResolvedTexts {
  languageCode: string;
  get(key: TextKey): Text;
  /**
   * A category's label, its description and the line naming its services ("Services: Google
   * Ads, Meta Pixel"; empty when it names none), on the banner and the preferences page alike.
   */
  category(category: RuntimeCategory): { label: Text; description: Text; services: Text };
}

/**
 * The lines that describe a category's box (its description, then its services), each with the
 * id the box names in `aria-describedby`, where it has them: the banner's and the page's alike.
 */
export const categoryNotes = (text: { description: Text; services: Text }, i: number) =>
  (
    [
      [`s${i}`, text.description],
      [`v${i}`, text.services],
    ] as const
  ).filter(([, line]) => line.text);

/**
 * Picks the texts for the wanted languages, in order (the page's `<html lang>`, then the
 * browser's languages): for each, the first of `candidates(tag)` that has texts, else another
 * tag of that language in the same script (`pt` finds `pt-BR`, `zh-TW` never `zh-Hans`), else
 * another tag of that language; English when none has texts. Each field falls back on its
 * own, to the texts of the chosen tag's shorter forms (`de` for `de-AT`) and for Norwegian its
 * counterpart's (`no` for `nb`), then to the operator's English text and then to DEFAULT_TEXTS,
 * so a half-translated banner still shows every string; an English one is marked English. The
 * privacy policy's address, in no language, comes last from the first language that has one, so
 * no visitor loses the operator's link; it is marked with the language of the texts it came from
 * where that is not the banner's. A category's own label and description (its configuration,
 * not its texts) are in no stated language and carry no mark but their own direction.
 */
export function resolveTexts(
  texts: Record<string, RuntimeTexts>,
  wanted: readonly string[],
): ResolvedTexts {
  // Each key as it is compared, read once: a lookup tries several candidates per wanted tag.
  const keys = Object.keys(texts).map((key) => [key, comparable(key)] as const);
  const find = (matches: (key: string) => boolean) =>
    keys.find(([, compared]) => matches(compared))?.[0];
  let lang: string | undefined;
  for (const tag of wanted.filter(Boolean).map(comparable)) {
    for (const candidate of candidates(tag)) lang ??= find((key) => key === candidate);
    lang ??=
      find((key) => language(key) === language(tag) && script(key) === script(tag)) ??
      find((key) => language(key) === language(tag));
  }
  const languageCode = lang ?? "en";
  const chosen = comparable(languageCode);
  /** No mark for texts of the banner's language and script, else the texts' own tag. */
  const markOf = (key: string, compared: string): { lang?: string } =>
    language(compared) === language(chosen) && script(compared) === script(chosen)
      ? {}
      : { lang: key };
  // English strings in a banner of another language say so; in an English one, nothing to say.
  const english = markOf("en", "en");
  // Found, not texts.en: the daemon stores "en", but a banner saved before it did may say "EN".
  const englishKey = find((key) => key === "en");
  // The chosen texts, then those of its shorter forms in the same script (RFC 4647 lookup):
  // `de-AT` may hold only what Austrian German says otherwise, the rest coming from `de`, in
  // the same language, so unmarked; then the operator's English.
  const own =
    lang === undefined
      ? []
      : candidates(comparable(lang)).flatMap((candidate) => find((key) => key === candidate) ?? []);
  const chain = [
    ...[...new Set(own)].map((key) => ({ own: texts[key], mark: {} })),
    { own: englishKey === undefined ? undefined : texts[englishKey], mark: english },
  ];
  // A field in no language, the privacy policy's address, is the operator's wherever one of
  // their languages has it: past the chain, the first language of the configuration that does.
  // A visitor shown built-in English (none of their languages has texts, and no `en`) still
  // gets the operator's link, marked with the language it came from when that is not the
  // banner's: the page it leads to is likely in that one (`hreflang`).
  const anyLanguage = keys.map(([key, compared]) => ({
    own: texts[key],
    mark: markOf(key, compared),
  }));
  /** The first text the chain has for a field, else the last resort, with its language. */
  const pick = (
    read: (own: RuntimeTexts) => string | undefined,
    last: string,
    lastMark: Omit<Text, "text">,
    further: typeof chain = [],
  ): Text => {
    for (const { own, mark } of [...chain, ...further]) {
      const text = own && read(own);
      if (text) return { text, ...mark };
    }
    // No mark on nothing: an empty last resort (no description) is not a text in any language.
    return last ? { text: last, ...lastMark } : { text: last };
  };
  const unstated = { unstated: true } as const;
  const get = (key: TextKey) =>
    pick(
      (own) => own[key],
      DEFAULT_TEXTS[key],
      english,
      key === "privacyPolicyUrl" ? anyLanguage : [],
    );
  return {
    languageCode,
    get,
    category: (category) => ({
      label: pick(
        (own) => own.categories?.[category.name]?.label,
        category.label || category.name,
        unstated,
      ),
      description: pick(
        (own) => own.categories?.[category.name]?.description,
        category.description,
        unstated,
      ),
      // The names are the services' own, in no language: the label's language marks the line.
      services: category.services
        ? {
            ...get("servicesLabel"),
            text: `${get("servicesLabel").text}: ${category.services.join(", ")}`,
          }
        : { text: "" },
    }),
  };
}

/**
 * Where to look for a tag's texts, most specific first (RFC 4647 lookup): the tag, then the tag
 * with its script made explicit (`zh-TW` is `zh-Hant-TW`: `zh-Hant` before the bare `zh`), then
 * shorter forms of the tag in the same script (`zh-HK` never falls to `zh`, which is Simplified);
 * then the same for its Norwegian counterpart (see norwegianCounterpart).
 * A subtag of one character (`x`, an extension) is never left last.
 */
function candidates(tag: string): string[] {
  const counterpart = norwegianCounterpart(tag);
  return [...ownCandidates(tag), ...(counterpart ? ownCandidates(counterpart) : [])];
}

/** The tag, with its script made explicit, then its shorter forms in the same script. */
function ownCandidates(tag: string): string[] {
  const own = script(tag);
  const full = maximized(tag);
  const found = [tag, full, full.split("-").slice(0, 2).join("-")];
  const parts = tag.split("-");
  for (let n = parts.length - 1; n >= 1; n--) {
    const shorter = parts.slice(0, n).join("-");
    if ((parts[n - 1] ?? "").length > 1 && script(shorter) === own) found.push(shorter);
  }
  return found;
}

/**
 * Norwegian (`no`) is the macrolanguage of Bokmål (`nb`) and Nynorsk (`nn`), tags Intl keeps
 * apart (it folds other macrolanguages' members into one tag: `cmn` is `zh`, `arb` is `ar`). Any
 * Norwegian reads `no`, so Bokmål and Nynorsk look there next (`nn-NO` → `no-NO`); and `no` is
 * written as Bokmål, so it looks at `nb` next. Nynorsk is never where `no` looks first: it is
 * found, last, as another tag of the language.
 */
function norwegianCounterpart(tag: string): string | undefined {
  const [primary, ...rest] = tag.split("-");
  const counterpart = primary === "no" ? "nb" : primary === "nb" || primary === "nn" ? "no" : "";
  return counterpart ? [counterpart, ...rest].join("-") : undefined;
}

const maximizedTags = new Map<string, string>();

/**
 * The tag with its likely script and region filled in (`sr` is `sr-cyrl-rs`), lower case; as
 * written where Intl cannot tell (a tag it cannot read, a browser without `Intl.Locale`).
 */
function maximized(tag: string): string {
  let full = maximizedTags.get(tag);
  if (full === undefined) {
    try {
      full = new Intl.Locale(tag).maximize().toString().toLowerCase();
    } catch {
      full = tag;
    }
    maximizedTags.set(tag, full);
  }
  return full;
}

/** The language of a tag, Norwegian's three tags counted as one (texts under `no` serve `nb`). */
const language = (tag: string) => {
  const primary = tag.split("-")[0] ?? tag;
  return primary === "nb" || primary === "nn" ? "no" : primary;
};

/** The script (ISO 15924, lower case) a tag names or implies, when known. */
const script = (tag: string): string | undefined => {
  const second = maximized(tag).split("-")[1];
  return second && /^[a-z]{4}$/.test(second) ? second : undefined;
};

/** Scripts written right to left (ISO 15924, lower case). */
const RTL_SCRIPTS =
  /^(adlm|arab|aran|armi|avst|chrs|cprt|elym|hatr|hebr|hung|khar|lydi|mand|mani|mend|merc|mero|narb|nbat|nkoo|orkh|ougr|palm|phli|phlp|phnx|prti|rohg|samr|sarb|sogd|sogo|syrc|syre|syrj|syrn|thaa|yezi)$/;
/** Languages written right to left, for a tag whose script Intl cannot tell. */
const RTL_LANGUAGES = /^(ar|arc|ckb|dv|fa|he|ks|ps|sd|syr|ug|ur|yi)(-|$)/;

/**
 * The marks of a text in another language than its surroundings (`lang` and `dir`, WCAG 3.1.2),
 * `dir="auto"` alone for one in no stated language, or undefined for one in theirs: what the
 * banner and the preferences page set alike.
 */
export function languageMark({
  lang,
  unstated,
}: Text): { lang?: string; dir: "rtl" | "ltr" | "auto" } | undefined {
  if (unstated) return { dir: "auto" };
  return lang ? { lang, dir: directionOf(lang) } : undefined;
}

/**
 * The writing direction of a language, for `dir`: its script's, the one its tag names or else
 * the one it is usually written in (`ar`, `pa-Arab` and `ff-Adlm` right to left, `sd-Deva` not).
 */
export function directionOf(languageCode: string): "rtl" | "ltr" {
  const tag = comparable(languageCode);
  const written = script(tag);
  const rtl = written ? RTL_SCRIPTS.test(written) : RTL_LANGUAGES.test(tag);
  return rtl ? "rtl" : "ltr";
}

/** Scripts a POSIX locale's modifier names (glibc's `sr_RS@latin`, `uz_UZ@cyrillic`). */
const POSIX_SCRIPTS = new Map([
  ["latin", "latn"],
  ["cyrillic", "cyrl"],
  ["devanagari", "deva"],
]);

/**
 * A language tag as texts are matched: canonical BCP 47 in lower case, so any case matches and a
 * deprecated tag matches its replacement ("iw" a key the daemon stored as "he"). A page's POSIX
 * locale (`<html lang="de_AT">`, `de_AT.UTF-8`, `de_AT@euro`, as PHP sites write it) is read as
 * the tag it names, `de-AT`: BCP 47 has no `_`, `.` or `@`. Its modifier, where it names a script,
 * is the tag's script (`sr_RS@latin` is `sr-Latn-RS`), and where it has the form of a variant, its
 * variant (`ca_ES@valencia` is `ca-ES-valencia`); any other (`@euro`) says nothing of the
 * language. A tag Intl cannot read is compared as it is, in lower case.
 */
function comparable(written: string): string {
  const [locale = "", modifier = ""] = written.toLowerCase().split("@");
  const base = locale.replace(/\..*/, "").replace(/_/g, "-");
  const posixScript = POSIX_SCRIPTS.get(modifier);
  const tag = posixScript
    ? base.replace(/^[^-]*/, (language) => `${language}-${posixScript}`)
    : /^[a-z\d]{5,8}$/.test(modifier)
      ? `${base}-${modifier}`
      : base;
  try {
    return (Intl.getCanonicalLocales(tag)[0] ?? tag).toLowerCase();
  } catch (error) {
    if (error instanceof RangeError) return tag;
    throw error;
  }
}
