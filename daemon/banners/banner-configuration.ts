import { z } from "zod";
import {
  type BannerConfiguration,
  type ConsentCategory,
  LAYOUTS,
  POSITIONS,
  TELEMETRY_LEVELS,
} from "#daemon/banners/banner-store.js";
import { DEFAULT_COLORS, isColor } from "#daemon/banners/colors.js";
import { isCountryCode, isRegionCode } from "#daemon/banners/countries.js";
import { hostOf, notPublicSuffix, PUBLIC_SUFFIX_MESSAGE, siteOf } from "#daemon/banners/domains.js";
import {
  EVEN_WITH_FAILED_ENTRIES,
  firstRepeat,
  IF_VALID_SO_FAR,
  LANGUAGE_CODE_MAX,
  label,
  noRepeats,
  text,
} from "#daemon/validation/rules.js";

/**
 * Category names appear in consent states and in data-category attributes. They are keys of the
 * JSON a visitor's choice is posted as, where `__proto__` is refused as prototype poisoning
 * (decisions §5), so a category of that name could never record a choice.
 */
const categoryName = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,100}$/, "must be 1-100 letters, digits, '_', '.' or '-'")
  .refine((name) => name !== "__proto__", {
    message: "must not be __proto__, a key JSON bodies may not carry",
    ...IF_VALID_SO_FAR,
  });
const LANGUAGE_TAG_MESSAGE = "must be a language tag such as en or pt-BR";
const languageCode = z
  .string()
  .regex(/^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8}){0,3}$/, LANGUAGE_TAG_MESSAGE)
  .refine((tag) => canonicalLanguage(tag) !== undefined, {
    message: LANGUAGE_TAG_MESSAGE,
    ...IF_VALID_SO_FAR,
  })
  // The key becomes the languageCode of the states and rows made in that language, which spec
  // 2.4 and decisions §5 limit to 20 characters: a longer one would lose every choice.
  .refine((tag) => (canonicalLanguage(tag) ?? "").length <= LANGUAGE_CODE_MAX, {
    message: `must be a language tag of at most ${LANGUAGE_CODE_MAX} characters (a consent state's languageCode)`,
    ...IF_VALID_SO_FAR,
  });
const color = z
  .string()
  .refine(isColor, "must be a hex, rgb()/rgba()/hsl()/hsla() or named CSS colour");
// text(): counted in characters and refused with an unpaired surrogate, like every other text.
// No white space, control character (NUL, DEL, C1) or invisible format character (U+200B,
// U+202E): a browser drops or encodes them, so the link would lead elsewhere than it reads.
const httpUrl = text(0, 2000).refine(
  (value) => value === "" || /^https?:\/\/[^\s\p{Cc}\p{Cf}]+$/iu.test(value),
  "must be an http(s) URL",
);

/**
 * A language tag in its canonical BCP 47 form (RFC 5646 §2.1.1 case, "EN" → "en", "pt-br" →
 * "pt-BR"; deprecated tags replaced, "iw" → "he"), or undefined for a tag Intl cannot read.
 */
function canonicalLanguage(tag: string): string | undefined {
  try {
    return Intl.getCanonicalLocales(tag)[0];
  } catch (error) {
    if (error instanceof RangeError) return undefined;
    throw error;
  }
}

/**
 * Texts keyed by canonical tag, so "EN" is the English fallback (texts.en) and one language has
 * one set of texts; two keys naming one language are refused. The runtime matches a page's tag
 * in any case (gateway/runtime/texts.ts).
 */
function byCanonicalLanguage<T>(map: Record<string, T>, ctx: z.RefinementCtx): Record<string, T> {
  const out = new Map<string, { tag: string; value: T }>();
  for (const [tag, value] of Object.entries(map)) {
    const canonical = canonicalLanguage(tag) ?? tag;
    const earlier = out.get(canonical);
    if (earlier) {
      ctx.addIssue({
        code: "custom",
        message: `must not repeat a language: ${earlier.tag} and ${tag} are both ${canonical}`,
      });
    } else out.set(canonical, { tag, value });
  }
  return Object.fromEntries([...out].map(([canonical, { value }]) => [canonical, value]));
}

const category = z.strictObject({
  name: categoryName,
  required: z.boolean().optional(),
  label: text(0, 100).optional(),
  description: text(0, 1000).optional(),
  // Labels, as the consent states and log rows that name them hold them (spec 2.4 `services`):
  // a control character would make a choice PUT state and the log route refuse.
  services: z
    .array(label(1, 100))
    .max(100)
    .superRefine(noRepeats("service"), EVEN_WITH_FAILED_ENTRIES)
    .optional(),
});

/**
 * Category names are keys of a visitor's `preferences` and values of `data-category`: two that
 * differ only in case would be two choices a visitor cannot tell apart, so they are refused too.
 */
function uniqueCategoryNames(list: readonly { name: string }[], ctx: z.RefinementCtx): void {
  const named = list.filter((c) => typeof c?.name === "string");
  const repeat = firstRepeat(named, (c) => c.name.toLowerCase());
  if (!repeat) return;
  const [earlier, later] = repeat;
  ctx.addIssue({
    code: "custom",
    message:
      earlier.name === later.name
        ? `must not repeat a category name: ${later.name}`
        : `must not repeat a category name: ${earlier.name} and ${later.name} differ only in case`,
  });
}

/**
 * The bytes a visitor's consent cookie may spend on category names and their services. The
 * runtime keeps the state as URL-encoded JSON in one cookie (gateway/runtime/state.ts), which
 * browsers cap at 4,096 bytes with its name; every other field of the largest state (a
 * 64-character rule id, a 20-character language, the US choices, every flag) takes 753. Names
 * beyond this would make a choice that is logged but never kept: the banner would ask again on
 * every page.
 */
export const CATEGORY_NAMES_COOKIE_BYTES = 3_000;

/**
 * The category names, all accepted, as the cookie holds them (URL-encoded JSON): `categories`,
 * and `services` with its field name where a category names some (spec 2.4).
 */
function cookieBytesOfNames(list: unknown[]): number {
  const categories = list as ({ name?: unknown; services?: unknown } | undefined)[];
  const names = categories.map((c) => c?.name);
  if (!names.every((name) => typeof name === "string")) return 0;
  const named = categories.filter((c) => Array.isArray(c?.services) && c.services.length > 0);
  const services = named.map((c) => [c?.name, c?.services]);
  const json = JSON.stringify(names);
  const withServices = named[0]
    ? `${json},"services":${JSON.stringify(Object.fromEntries(services))}`
    : json;
  return encodeURIComponent(withServices).length;
}

function namesFitCookie(list: unknown[], ctx: z.RefinementCtx): void {
  const bytes = cookieBytesOfNames(list);
  if (bytes <= CATEGORY_NAMES_COOKIE_BYTES) return;
  ctx.addIssue({
    code: "custom",
    message: `must have names that together fit a visitor's consent cookie: ${bytes} bytes URL-encoded, at most ${CATEGORY_NAMES_COOKIE_BYTES} (use fewer or shorter names)`,
  });
}

const texts = z.strictObject({
  title: text(0, 200).optional(),
  description: text(0, 2000).optional(),
  acceptAll: text(0, 100).optional(),
  rejectAll: text(0, 100).optional(),
  customize: text(0, 100).optional(),
  save: text(0, 100).optional(),
  privacyPolicyUrl: httpUrl.optional(),
  privacyPolicyLabel: text(0, 100).optional(),
  alwaysOnLabel: text(0, 50).optional(),
  servicesLabel: text(0, 50).optional(),
  categories: z
    .record(
      categoryName,
      z.strictObject({ label: text(0, 100).optional(), description: text(0, 1000).optional() }),
    )
    .optional(),
});

const COUNTRY_MESSAGE =
  "must be an assigned ISO 3166-1 alpha-2 code such as DE (the United Kingdom is GB)";
const REGION_MESSAGE = "must be an ISO 3166-2 code of an assigned country, such as US-CA";

const jurisdictionRule = z
  .strictObject({
    id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1-64 letters, digits, '_', '.' or '-'"),
    countries: z
      .array(z.string().refine(isCountryCode, COUNTRY_MESSAGE))
      .max(300)
      .superRefine(noRepeats("country"), EVEN_WITH_FAILED_ENTRIES)
      .optional(),
    regions: z
      .array(z.string().refine(isRegionCode, REGION_MESSAGE))
      .max(300)
      .superRefine(noRepeats("region"), EVEN_WITH_FAILED_ENTRIES)
      .optional(),
    mode: z.enum(["opt_in", "opt_out", "notice"]),
  })
  // A rule with both lists matches a visitor in one of its regions and one of its countries
  // (runtime-config.ts), so a region of another country would never match.
  .superRefine((rule, ctx) => {
    const countries = rule.countries ?? [];
    // A list with an unassigned code has its own message already.
    if (countries.length === 0 || !countries.every(isCountryCode)) return;
    (rule.regions ?? []).forEach((region, index) => {
      // A malformed region has its own message already.
      if (!isRegionCode(region) || countries.includes(region.slice(0, 2))) return;
      ctx.addIssue({
        code: "custom",
        path: ["regions", index],
        message: `must lie in one of the rule's countries (${countries.join(", ")}), or the rule never matches there`,
      });
    });
  });

const additionalDomain = z
  .string()
  .refine((value) => hostOf(value) !== null, "must be a valid domain or localhost")
  .refine(notPublicSuffix, PUBLIC_SUFFIX_MESSAGE);

/**
 * The configuration object of a create or update body: every field optional (spec 4.3), unknown
 * fields refused so a misspelt option is an error rather than silently ignored.
 */
export const configurationInput = z.strictObject({
  layout: z.enum(LAYOUTS).optional(),
  position: z.enum(POSITIONS).optional(),
  primaryColor: color.optional(),
  secondaryColor: color.optional(),
  textColor: color.optional(),
  accentColor: color.optional(),
  // spec 8: a consent state names at most 50 categories, so a banner offers no more.
  categories: z
    .array(category)
    .min(1)
    .max(50, "must have at most 50 entries")
    .superRefine(uniqueCategoryNames, EVEN_WITH_FAILED_ENTRIES)
    .superRefine(namesFitCookie, EVEN_WITH_FAILED_ENTRIES)
    .optional(),
  texts: z.record(languageCode, texts).transform(byCanonicalLanguage).optional(),
  jurisdictionRules: z
    .array(jurisdictionRule)
    .max(100)
    .refine(
      (list) => {
        const ids = list.map((r) => r?.id).filter((id) => typeof id === "string");
        return new Set(ids).size === ids.length;
      },
      { message: "must not repeat a rule id", ...EVEN_WITH_FAILED_ENTRIES },
    )
    .optional(),
  telemetryLevel: z.enum(TELEMETRY_LEVELS).optional(),
  additionalDomains: z.array(additionalDomain).max(50).optional(),
});

export type ConfigurationInput = z.infer<typeof configurationInput>;

const DEFAULT_CATEGORIES: ConsentCategory[] = [
  {
    name: "necessary",
    required: true,
    label: "Necessary",
    description: "Needed for the site to work.",
    services: [],
  },
  {
    name: "analytics",
    required: false,
    label: "Analytics",
    description: "Helps us understand how the site is used.",
    services: [],
  },
  {
    name: "marketing",
    required: false,
    label: "Marketing",
    description: "Personalised advertising.",
    services: [],
  },
];

/** spec 2.1 defaults, plus decisions §3 (telemetry "origin", three categories, no extra domains). */
export function defaultConfiguration(): BannerConfiguration {
  return {
    layout: "banner",
    position: "bottom",
    primaryColor: DEFAULT_COLORS.primary,
    secondaryColor: DEFAULT_COLORS.secondary,
    textColor: DEFAULT_COLORS.text,
    accentColor: DEFAULT_COLORS.accent,
    categories: structuredClone(DEFAULT_CATEGORIES),
    texts: {},
    jurisdictionRules: [],
    telemetryLevel: "origin",
    additionalDomains: [],
  };
}

/** Applies validated input over a complete configuration: fields present replace whole fields. */
export function applyConfiguration(
  base: BannerConfiguration,
  input: ConfigurationInput,
): BannerConfiguration {
  const next = structuredClone(base);
  if (input.layout) next.layout = input.layout;
  if (input.position) next.position = input.position;
  if (input.primaryColor) next.primaryColor = input.primaryColor;
  if (input.secondaryColor) next.secondaryColor = input.secondaryColor;
  if (input.textColor) next.textColor = input.textColor;
  if (input.accentColor) next.accentColor = input.accentColor;
  if (input.telemetryLevel) next.telemetryLevel = input.telemetryLevel;
  if (input.categories) {
    next.categories = input.categories.map((c) => ({
      name: c.name,
      required: c.required ?? false,
      label: c.label ?? c.name,
      description: c.description ?? "",
      services: c.services ?? [],
    }));
  }
  if (input.texts) next.texts = completeTexts(input.texts);
  if (input.jurisdictionRules) {
    next.jurisdictionRules = input.jurisdictionRules.map((r) => ({
      id: r.id,
      countries: r.countries ?? [],
      regions: r.regions ?? [],
      mode: r.mode,
    }));
  }
  if (input.additionalDomains)
    next.additionalDomains = [...new Set(input.additionalDomains.map((d) => siteOf(d) as string))];
  return next;
}

function completeTexts(
  input: NonNullable<ConfigurationInput["texts"]>,
): BannerConfiguration["texts"] {
  return Object.fromEntries(
    Object.entries(input).map(([language, t]) => [
      language,
      {
        title: t.title ?? "",
        description: t.description ?? "",
        acceptAll: t.acceptAll ?? "",
        rejectAll: t.rejectAll ?? "",
        customize: t.customize ?? "",
        save: t.save ?? "",
        privacyPolicyUrl: t.privacyPolicyUrl ?? "",
        privacyPolicyLabel: t.privacyPolicyLabel ?? "",
        alwaysOnLabel: t.alwaysOnLabel ?? "",
        servicesLabel: t.servicesLabel ?? "",
        categories: Object.fromEntries(
          Object.entries(t.categories ?? {}).map(([name, c]) => [
            name,
            { label: c.label ?? "", description: c.description ?? "" },
          ]),
        ),
      },
    ]),
  );
}
