import { signalsFor } from "../../daemon/banners/category-signals.js";
import { fail } from "./console-lines.js";

interface ConsentWindow {
  dataLayer?: unknown[];
}

/** Google's gtag() shape: the tag reads `arguments` objects from the dataLayer, not arrays. */
function gtagArguments(..._command: unknown[]): IArguments {
  // biome-ignore lint/complexity/noArguments: Consent Mode requires the arguments object itself.
  return arguments;
}

/**
 * Pushes a gtag() command for the banner `publicId`. A page whose dataLayer is not an array (or
 * whose tag manager's push throws) gets a console error, and the banner goes on without Consent
 * Mode.
 */
function gtag(publicId: string, ...command: unknown[]): void {
  const target = window as unknown as ConsentWindow;
  try {
    target.dataLayer = target.dataLayer || [];
    target.dataLayer.push(gtagArguments(...command));
  } catch (error) {
    fail(publicId, `the page's dataLayer refused Consent Mode's ${command[1]}`, error);
  }
}

/** `consent default`: everything optional denied, before any tag runs (the loader runs first). */
export function consentDefault(publicId: string): void {
  gtag(publicId, "consent", "default", { ...signalsFor([]), wait_for_update: 500 });
}

/** `consent update` after a choice, a stored state or a jurisdiction default. */
export function consentUpdate(publicId: string, accepted: readonly string[]): void {
  gtag(publicId, "consent", "update", signalsFor(accepted));
}
