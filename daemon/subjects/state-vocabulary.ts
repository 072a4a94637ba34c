/**
 * spec 2.4: the closed vocabularies of the canonical consent state. Shared by the PUT state rules
 * and the banner runtime (which bundles this module alone, so it imports nothing).
 */
export const ACCEPT_TYPES = ["all", "custom", "necessary"] as const;

export type AcceptType = (typeof ACCEPT_TYPES)[number];

/** How a consent state was collected. */
export const COLLECTED_VIA = [
  "banner",
  "preferences",
  "api",
  "default_optin",
  "default_optout",
  "default_notice",
  "hidden_autogrant",
] as const;

export type CollectedVia = (typeof COLLECTED_VIA)[number];
