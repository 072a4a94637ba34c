import { signalsFor } from "../../daemon/banners/category-signals.js";

interface ConsentWindow {
  dataLayer?: unknown[];
}

/**
 * Google's gtag() shape: the tag reads `arguments` objects from the dataLayer, not arrays. A
 * page whose dataLayer is not an array (or whose tag manager's push throws) gets a console error,
 * and the banner goes on without Consent Mode.
 */
function gtag(...args: unknown[]): void {
  const target = window as unknown as ConsentWindow;
  try {
    target.dataLayer = target.dataLayer || [];
    // biome-ignore lint/complexity/noArguments: Consent Mode requires the arguments object itself.
    target.dataLayer.push(arguments);
  } catch (error) {
    console.error(`consent banner: the page's dataLayer refused Consent Mode's ${args[1]}`, error);
  }
}

/** `consent default`: everything optional denied, before any tag runs (the loader runs first). */
export function consentDefault(): void {
  gtag("consent", "default", { ...signalsFor([]), wait_for_update: 500 });
}

/** `consent update` after a choice, a stored state or a jurisdiction default. */
export function consentUpdate(accepted: readonly string[]): void {
  gtag("consent", "update", signalsFor(accepted));
}
