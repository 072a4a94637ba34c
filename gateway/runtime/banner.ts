import { isAdCategory } from "../../daemon/banners/category-signals.js";
import type { RuntimeConfig, RuntimeRule } from "./config.js";
import type { ConsentState } from "./state.js";
import type { Choice } from "./view.js";

/** Supplied by the loader around this bundle (gateway/loader/loader-response.ts). */
declare const __CONFIG__: RuntimeConfig;

/**
 * The banner this loader runs, as the loader configured it for the visitor's location: one per
 * page (docs/banner-runtime.md), so its configuration and what follows from it are the bundle's
 * constants, shared by the runtime's modules.
 */
export const config = __CONFIG__;
export const all = config.categories.map((category) => category.name);
export const required = config.categories
  .filter((category) => category.required)
  .map((c) => c.name);

/** Whether the browser sends Global Privacy Control. */
export const gpc = (navigator as { globalPrivacyControl?: boolean }).globalPrivacyControl === true;
/**
 * Global Privacy Control opts out of sale and sharing where a US rule applies. A state made so
 * says `gpcRespected: true` whatever it accepts (docs/behaviour.md: the only field of spec 2.4
 * that can tell a later visit it was made with the signal on).
 */
export const gpcApplies = gpc && !!config.rule?.us;

/**
 * The categories a rule's default grants on this page: the required ones under opt_in, else all
 * but the advertising ones while Global Privacy Control applies.
 */
export const defaultCategories = (rule: RuntimeRule) =>
  rule.mode === "opt_in" ? required : all.filter((name) => !(gpcApplies && isAdCategory(name)));

/**
 * Accept all is "all" and Reject all "necessary", whatever the categories; otherwise what the
 * optional categories say: none accepted "necessary", every one "all", else "custom".
 */
export function acceptTypeOf(categories: string[], choice?: Choice): ConsentState["acceptType"] {
  if (choice === "accept") return "all";
  if (choice === "reject") return "necessary";
  const optional = all.filter((name) => !required.includes(name));
  const accepted = optional.filter((name) => categories.includes(name)).length;
  return accepted === 0 ? "necessary" : accepted === optional.length ? "all" : "custom";
}
