/**
 * The banner configuration the loader embeds in the runtime (decisions §6). The gateway builds it
 * from the production configuration (gateway/loader/runtime-config.ts); only what the browser
 * needs travels, since every byte counts against the 10 KB first-visit budget.
 */
export interface RuntimeConfig {
  /** Public Banner ID. */
  id: string;
  /** Production revision: a stored choice older than this is asked again. */
  revision: number;
  layout: "banner" | "modal" | "inline";
  position: "top" | "bottom" | "center";
  colors: { primary: string; secondary: string; text: string; accent: string };
  categories: RuntimeCategory[];
  /** Texts per language code; only fields the operator filled in. */
  texts: Record<string, RuntimeTexts>;
  /** The jurisdiction rule the gateway picked for this visitor, if any. */
  rule?: RuntimeRule;
  /** The visitor's location from the trusted geo header, when one is configured. */
  country?: string;
  region?: string;
}

export interface RuntimeCategory {
  name: string;
  required: boolean;
  label: string;
  description: string;
  /** The services (vendors) the category covers; absent when it names none. */
  services?: string[];
}

export interface RuntimeTexts {
  title?: string;
  description?: string;
  acceptAll?: string;
  rejectAll?: string;
  customize?: string;
  save?: string;
  privacyPolicyUrl?: string;
  privacyPolicyLabel?: string;
  alwaysOnLabel?: string;
  servicesLabel?: string;
  categories?: Record<string, { label?: string; description?: string }>;
}

export interface RuntimeRule {
  id: string;
  mode: "opt_in" | "opt_out" | "notice";
  /** A US rule: Global Privacy Control opts the visitor out of sale and sharing. */
  us: boolean;
}
