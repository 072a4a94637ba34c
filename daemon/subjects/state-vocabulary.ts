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

/** The fields of the state; PUT state refuses any other (decisions §4), and so does applyState. */
export const CONSENT_STATE_FIELDS = [
  "schemaVersion",
  "categories",
  "revision",
  "acceptType",
  "consentId",
  "consentTimestamp",
  "lastConsentTimestamp",
  "languageCode",
  "services",
  "jurisdictions",
  "gpcRespected",
  "usOptOutChoices",
  "isPending",
  "isDefaultState",
  "collectedVia",
] as const;

export type ConsentStateField = (typeof CONSENT_STATE_FIELDS)[number];

/**
 * The US opt-out purposes of `usOptOutChoices` (and of the log payload's `purposeChoices`,
 * decisions §5), each a yes or no.
 */
export const US_OPT_OUT_PURPOSES = [
  "saleSharing",
  "targetedAdvertising",
  "sensitiveData",
  "profiling",
] as const;
