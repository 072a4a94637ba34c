import { colorRolesOf } from "#daemon/banners/colors.js";
import { isCountryCode } from "#daemon/banners/countries.js";
import type { RuntimeConfig, RuntimeRule, RuntimeTexts } from "#gateway/runtime/config.js";
import type { BannerTexts, JurisdictionRule, PublishedBanner } from "#gen/consent/v1/banner_pb.js";

/** A visitor's location from the trusted geo header: ISO 3166-1 country, ISO 3166-2 region. */
export interface Geo {
  country: string;
  region?: string;
}

/**
 * Reads the geo header: a country ("DE", as CF-IPCountry sends it) or a country and subdivision
 * ("US-CA"). Anything but an assigned country code (the codes rules may name) is no location:
 * Cloudflare's "XX" and "T1", and the "EU", "A1" or "ZZ" other providers send.
 */
export function parseGeo(value: string | undefined): Geo | null {
  const match = /^([A-Z]{2})(?:-([A-Z0-9]{1,3}))?$/.exec((value ?? "").trim().toUpperCase());
  if (!match?.[1] || !isCountryCode(match[1])) return null;
  return match[2]
    ? { country: match[1], region: `${match[1]}-${match[2]}` }
    : { country: match[1] };
}

function matches(rule: JurisdictionRule, geo: Geo | null): boolean {
  const country = rule.countries.length === 0 || (!!geo && rule.countries.includes(geo.country));
  const region = rule.regions.length === 0 || (!!geo?.region && rule.regions.includes(geo.region));
  return country && region;
}

/**
 * The jurisdiction rule for a visitor: the first that matches (the configuration's order). With
 * no location only a rule naming no country and no region can match. A rule is a US rule when
 * it names the US or a US region, or the visitor is in the US (decisions §3, GPC).
 */
export function pickRule(
  rules: readonly JurisdictionRule[],
  geo: Geo | null,
): RuntimeRule | undefined {
  const rule = rules.find((candidate) => matches(candidate, geo));
  if (!rule) return undefined;
  const us =
    geo?.country === "US" ||
    rule.countries.includes("US") ||
    rule.regions.some((region) => region.startsWith("US-"));
  return { id: rule.id, mode: rule.mode as RuntimeRule["mode"], us };
}

/**
 * The part of a visitor's location a banner's loader depends on: none for a banner without rules,
 * the country alone unless a rule names regions, and none for a location no rule matches. The
 * loader body is built from this alone, so visitors whose locations reduce to the same value
 * share one variant and one body, and a body never carries a location detail another visitor of
 * that variant does not share. runtimeConfig names the location only beside a matched rule, and a
 * rule that matches no location (naming no country and no region) matches every location too: a
 * location no rule matches gets the very bytes of no location, kept and built once for them all.
 */
export function variantGeo(banner: PublishedBanner, geo: Geo | null): Geo | null {
  const rules = banner.configuration?.jurisdictionRules ?? [];
  if (rules.length === 0 || !geo) return null;
  const location = rules.some((rule) => rule.regions.length > 0) ? geo : { country: geo.country };
  return rules.some((rule) => matches(rule, location)) ? location : null;
}

/** The cache key of a loader variant: the variant's location, as variantGeo reduces it. */
export function variantKey(geo: Geo | null): string {
  return geo ? (geo.region ?? geo.country) : "";
}

/** Texts with empty fields left out: the runtime falls back field by field. */
function runtimeTexts(texts: BannerTexts): RuntimeTexts {
  const categories = Object.fromEntries(
    Object.entries(texts.categories)
      .map(([name, t]) => [name, dropEmpty({ label: t.label, description: t.description })])
      .filter(([, t]) => Object.keys(t as object).length > 0),
  );
  return dropEmpty({
    title: texts.title,
    description: texts.description,
    acceptAll: texts.acceptAll,
    rejectAll: texts.rejectAll,
    customize: texts.customize,
    save: texts.save,
    privacyPolicyUrl: texts.privacyPolicyUrl,
    privacyPolicyLabel: texts.privacyPolicyLabel,
    alwaysOnLabel: texts.alwaysOnLabel,
    servicesLabel: texts.servicesLabel,
    ...(Object.keys(categories).length > 0 && { categories }),
  });
}

function dropEmpty<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== "")) as T;
}

/** The production configuration as the runtime reads it, for one visitor location. */
export function runtimeConfig(banner: PublishedBanner, geo: Geo | null): RuntimeConfig {
  const configuration = banner.configuration;
  const rule = pickRule(configuration?.jurisdictionRules ?? [], geo);
  return {
    id: banner.publicId,
    revision: banner.revision,
    layout: (configuration?.layout || "banner") as RuntimeConfig["layout"],
    position: (configuration?.position || "bottom") as RuntimeConfig["position"],
    colors: colorRolesOf(configuration),
    categories: (configuration?.categories ?? []).map((c) => ({
      name: c.name,
      required: c.required,
      label: c.label,
      description: c.description,
      // Shown under the category and written into the states that accept it; a category with
      // none carries no field, so a banner without services costs no byte for them.
      ...(c.services.length > 0 && { services: c.services }),
    })),
    texts: Object.fromEntries(
      Object.entries(configuration?.texts ?? {}).map(([lang, t]) => [lang, runtimeTexts(t)]),
    ),
    ...(rule && { rule }),
    ...(rule && geo && { country: geo.country, ...(geo.region && { region: geo.region }) }),
  };
}
