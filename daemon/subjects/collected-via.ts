/**
 * spec 2.4: how a consent state was collected. Shared by the PUT state rules and the banner
 * runtime (which bundles this module alone, so it imports nothing).
 */
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
