/**
 * Google Consent Mode v2 (documented in docs/banner-runtime.md). Each category name maps to the
 * signals it grants; a category not listed here grants none. security_storage and
 * functionality_storage count as strictly necessary and are always granted.
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

interface ConsentWindow {
  dataLayer?: unknown[];
}

/** Google's gtag() shape: the tag reads `arguments` objects from the dataLayer, not arrays. */
function gtag(..._args: unknown[]): void {
  const target = window as unknown as ConsentWindow;
  target.dataLayer = target.dataLayer || [];
  // biome-ignore lint/complexity/noArguments: Consent Mode requires the arguments object itself.
  target.dataLayer.push(arguments);
}

/** `consent default`: everything optional denied, before any tag runs (the loader runs first). */
export function consentDefault(): void {
  gtag("consent", "default", { ...signalsFor([]), wait_for_update: 500 });
}

/** `consent update` after a choice, a stored state or a jurisdiction default. */
export function consentUpdate(accepted: readonly string[]): void {
  gtag("consent", "update", signalsFor(accepted));
}
