/**
 * What a banner's categories mean beyond their names: the Google Consent Mode v2 signals each
 * grants (documented in docs/banner-runtime.md), and so which of them feed advertising, what a
 * US opt-out of sale and sharing refuses; and the services a choice accepts with them. The
 * banner runtime applies them in the browser, and the daemon to a choice made on the
 * preferences page, so both record one choice the same way.
 * Plain code without imports: the runtime bundles this file.
 */

/**
 * Each category name maps to the signals it grants; a category not listed here grants none.
 * security_storage and functionality_storage count as strictly necessary and are always granted.
 */
const AD_SIGNALS = ["ad_storage", "ad_user_data", "ad_personalization"];
const ANALYTICS_SIGNALS = ["analytics_storage"];
const FUNCTIONAL_SIGNALS = ["functionality_storage", "personalization_storage"];
export const SIGNALS_OF_CATEGORY: Record<string, string[]> = {
  analytics: ANALYTICS_SIGNALS,
  statistics: ANALYTICS_SIGNALS,
  performance: ANALYTICS_SIGNALS,
  marketing: AD_SIGNALS,
  advertising: AD_SIGNALS,
  ads: AD_SIGNALS,
  targeting: AD_SIGNALS,
  functional: FUNCTIONAL_SIGNALS,
  preferences: FUNCTIONAL_SIGNALS,
  personalization: FUNCTIONAL_SIGNALS,
};

/** True for a category whose data feeds advertising: what a US opt-out of sale/sharing refuses. */
export function isAdCategory(name: string): boolean {
  return SIGNALS_OF_CATEGORY[name.toLowerCase()] === AD_SIGNALS;
}

type Signals = Record<string, "granted" | "denied">;

/** The signals for a set of accepted categories. */
export function signalsFor(accepted: readonly string[]): Signals {
  const signals: Signals = {
    ad_storage: "denied",
    ad_user_data: "denied",
    ad_personalization: "denied",
    analytics_storage: "denied",
    personalization_storage: "denied",
    functionality_storage: "granted",
    security_storage: "granted",
  };
  for (const name of accepted) {
    for (const signal of SIGNALS_OF_CATEGORY[name.toLowerCase()] ?? []) signals[signal] = "granted";
  }
  return signals;
}

/**
 * The US opt-outs (spec 2.4 usOptOutChoices, decisions §5 purposeChoices) a set of accepted
 * categories stands for where a US rule applies: sale/sharing and targeted advertising are opted
 * out of unless an advertising category is accepted.
 */
export function usOptOutChoices(accepted: readonly string[]): {
  saleSharing: boolean;
  targetedAdvertising: boolean;
} {
  const ads = accepted.some(isAdCategory);
  return { saleSharing: !ads, targetedAdvertising: !ads };
}

/**
 * spec 2.4 `services` of a choice: each accepted category's services, where it names some;
 * undefined when no such category is accepted, so a banner without services records the states
 * and rows it recorded before.
 */
export function acceptedServices(
  categories: readonly { name: string; services?: string[] }[],
  accepted: readonly string[],
): Record<string, string[]> | undefined {
  const named = categories.filter((c) => c.services?.[0] && accepted.includes(c.name));
  return named[0] && Object.fromEntries(named.map((c) => [c.name, c.services as string[]]));
}
