import type { RuntimeConfig } from "#gateway/runtime/config.js";
import { rawHttp } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** The settings of a service that reads the visitor's location from a loopback proxy's CF-IPCountry. */
export const TRUSTED_GEO_HEADER = {
  CONSENT_GEO_HEADER: "CF-IPCountry",
  CONSENT_TRUST_PROXY: "loopback",
};

/** A service with its gateway, reading the visitor's location from a loopback proxy's CF-IPCountry. */
export function startGeoService(): Promise<TestService> {
  return startTestService({
    gateway: true,
    env: TRUSTED_GEO_HEADER,
  });
}

/** One loader response as sent (rawHttp: fetch would undo the content encoding). */
export function loader(
  service: TestService,
  publicId: string,
  headers: Record<string, string> = {},
) {
  return rawHttp(service, "GET", `/loader/${publicId}.js`, {
    "accept-encoding": "identity",
    ...headers,
  });
}

/** The configuration bound around the runtime: `(function(__CONFIG__){…})(<json>);`. */
export function configOf(body: Buffer): RuntimeConfig {
  const json = /\}\)\((\{.*\})\);\n$/s.exec(body.toString("utf8"))?.[1];
  return JSON.parse(json ?? "null");
}

/** Jurisdiction rules by country, by region, and for everyone else. */
export const jurisdictionRules = [
  { id: "eu", countries: ["DE", "FR"], mode: "opt_in" },
  { id: "us-ca", regions: ["US-CA"], mode: "opt_out" },
  { id: "everyone", mode: "notice" },
];

/** The services (vendors) of the payload budget's categories, as a shop's banner lists them. */
const BUDGET_SERVICES: Record<string, string[]> = {
  necessary: ["Shop session", "Cloudflare"],
  functional: ["Intercom"],
  analytics: ["Google Analytics", "Hotjar"],
  marketing: ["Google Ads", "Meta Pixel", "TikTok Pixel"],
  social: ["YouTube", "Instagram"],
};

/**
 * The configuration the first-visit payload budget is held to: 3 languages, 5 categories with
 * their services and the 3 rules above.
 */
export function payloadBudgetConfiguration() {
  const texts = Object.fromEntries(
    ["en", "de", "fr"].map((lang) => [
      lang,
      {
        title: `Privacy (${lang})`,
        description: "We use cookies to run this site, measure its use and show relevant ads.",
        acceptAll: "Accept all",
        rejectAll: "Reject all",
        customize: "Choose",
        save: "Save",
        privacyPolicyUrl: "https://shop.example.com/privacy",
      },
    ]),
  );
  const categories = ["necessary", "functional", "analytics", "marketing", "social"].map(
    (name, i) => ({
      name,
      required: i === 0,
      label: name,
      description: `What ${name} does.`,
      services: BUDGET_SERVICES[name],
    }),
  );
  return { texts, categories, jurisdictionRules };
}
