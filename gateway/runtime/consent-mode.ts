import { signalsFor } from "../../daemon/banners/category-signals.js";

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
