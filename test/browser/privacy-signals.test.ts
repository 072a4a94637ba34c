import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  dialog,
  localBanner,
  NONCE,
  openVisitor,
  showPreferences,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
  waitForRows,
} from "#test/support/browser.js";
import { TRUSTED_GEO_HEADER } from "#test/support/loader.js";

/** Names from each row of docs/banner-runtime.md's category→signal table, in other cases. */
const categories = [
  { name: "necessary", required: true },
  { name: "Statistics" },
  { name: "Ads" },
  { name: "preferences" },
  { name: "chat" },
];
const jurisdictionRules = [
  { id: "eu", countries: ["DE", "FR"], mode: "opt_in" },
  { id: "us-ca", regions: ["US-CA"], mode: "opt_out" },
  { id: "uk", countries: ["GB"], mode: "notice" },
];
/** One gated tag per category, each noting in `window.ran` that it ran. */
const taggedBody = categories
  .map(
    ({ name }) =>
      `<script type="text/plain" data-category="${name.toLowerCase()}" nonce="${NONCE}">(window.ran = window.ran || []).push("${name}");</script>`,
  )
  .join("\n");
/** The page's own gtag snippet (Google's), before the loader's tag or after it. */
const gtagSnippet = (id: string) =>
  `<script nonce="${NONCE}">window.dataLayer = window.dataLayer || []; function gtag(){dataLayer.push(arguments)} gtag("config", "${id}");</script>`;

/** Every Consent Mode v2 signal; those not listed are denied. */
const signals = (...granted: string[]) =>
  Object.fromEntries(
    [
      "ad_storage",
      "ad_user_data",
      "ad_personalization",
      "analytics_storage",
      "personalization_storage",
      "functionality_storage",
      "security_storage",
    ].map((signal) => [
      signal,
      granted.includes(signal) || /^(functionality|security)_/.test(signal) ? "granted" : "denied",
    ]),
  );
const ANALYTICS = ["analytics_storage"];
const ADS = ["ad_storage", "ad_user_data", "ad_personalization"];
const FUNCTIONAL = ["personalization_storage"];
const consentDefault = ["consent", "default", { ...signals(), wait_for_update: 500 }];

/**
 * What a site owner sees of the banner's privacy signals in Chromium (docs/banner-runtime.md,
 * decisions §3, §5, §6): Consent Mode's default and updates, jurisdiction defaults chosen by the
 * trusted geo header, Global Privacy Control, and the gated tags those defaults run.
 *
 * The tests run side by side: each has a banner and browser contexts of its own, and two wait out
 * waitForRows' bound to show that visits recorded nothing more. Side by side on a busy machine, a
 * test may take several times what it takes alone: hence the limit.
 */
describe.skipIf(skipBrowserTests)(
  "banner runtime in Chromium: privacy signals",
  { concurrent: true, timeout: 120_000 },
  () => {
    const ctx = useBrowserSite(TRUSTED_GEO_HEADER);
    /** A banner on localhost (any port) with the file's categories, and more configuration. */
    const siteBanner = (configuration: Record<string, unknown> = {}) =>
      localBanner(ctx.service, categories, configuration);

    /** A visitor's browser (openVisitor). */
    const visitor = (options: Parameters<typeof openVisitor>[1] = {}) =>
      openVisitor(ctx.browser, options);

    /** Loads the banner's page of gated tags, with `head` before the loader and `body` after it. */
    async function visit(
      page: Page,
      publicId: string,
      markup: { head?: string; body?: string } = {},
    ) {
      const path = `/${publicId}-${Math.random().toString(36).slice(2)}`;
      await page.goto(
        ctx.site.page(path, {
          publicId,
          head: markup.head,
          body: `${markup.body ?? ""}${taggedBody}`,
        }),
      );
      await page.waitForFunction(() => "consentBanner" in window);
    }

    /** The dataLayer's entries, an `arguments` object as its array (and marked so). */
    const dataLayer = (page: Page) =>
      page.evaluate(() =>
        ((window as unknown as { dataLayer?: unknown[] }).dataLayer ?? []).map((entry) =>
          Object.prototype.toString.call(entry) === "[object Arguments]"
            ? Array.from(entry as ArrayLike<unknown>)
            : ["not arguments", entry],
        ),
      );
    /** The tags that ran, once the page has had time to run those it will. */
    const ran = async (page: Page) => {
      await page.waitForLoadState("load");
      await page.waitForTimeout(100);
      return page.evaluate(() => (window as unknown as { ran?: string[] }).ran ?? []);
    };
    const rowsOf = async (teamId: string, count: number) =>
      (await waitForRows(ctx.service, teamId, count)).map((row) => ({
        method: row.method,
        consentId: row.consentId,
        preferences: row.preferences,
        gpc: row.gpc,
        matchedRuleId: row.matchedRuleId,
        country: row.country,
        region: row.region,
        purposeChoices: row.purposeChoices,
      }));

    it("pushes Consent Mode's default before any later tag, around the page's own gtag, and the table's signals after a choice and on the next visit", async () => {
      const { publicId, teamId } = await siteBanner();
      const { context, page, warnings } = await visitor();
      await visit(page, publicId, { head: gtagSnippet("G-BEFORE"), body: gtagSnippet("G-AFTER") });
      expect(await dataLayer(page)).toEqual([
        ["config", "G-BEFORE"],
        consentDefault,
        ["config", "G-AFTER"],
      ]);
      expect(await ran(page)).toEqual(["necessary"]);
      await dialog(page).getByRole("button", { name: "Customize" }).click();
      await dialog(page).getByRole("checkbox", { name: "Statistics" }).check();
      await dialog(page).getByRole("checkbox", { name: "preferences" }).check();
      await dialog(page).getByRole("checkbox", { name: "chat" }).check();
      await dialog(page).getByRole("button", { name: "Save choices" }).click();
      expect((await dataLayer(page)).slice(3)).toEqual([
        ["consent", "update", signals(...ANALYTICS, ...FUNCTIONAL)],
      ]);
      expect(await ran(page)).toEqual(["necessary", "Statistics", "preferences", "chat"]);
      expect(await rowsOf(teamId, 1)).toMatchObject([
        {
          method: "consent_given",
          preferences: {
            necessary: true,
            Statistics: true,
            Ads: false,
            preferences: true,
            chat: true,
          },
          gpc: false,
        },
      ]);

      // The next visit: the stored state's update right after the default, before the page's tags.
      await visit(page, publicId, { head: gtagSnippet("G-BEFORE"), body: gtagSnippet("G-AFTER") });
      expect(await dataLayer(page)).toEqual([
        ["config", "G-BEFORE"],
        consentDefault,
        ["consent", "update", signals(...ANALYTICS, ...FUNCTIONAL)],
        ["config", "G-AFTER"],
      ]);
      expect(await dialog(page).count()).toBe(0);
      // Accept all grants every signal of the table.
      await showPreferences(page);
      await dialog(page).getByRole("button", { name: "Accept all" }).click();
      expect((await dataLayer(page)).at(-1)).toEqual([
        "consent",
        "update",
        signals(...ANALYTICS, ...ADS, ...FUNCTIONAL),
      ]);
      expect((await rowsOf(teamId, 2))[1]).toMatchObject({ method: "consent_changed" });
      expect(warnings).toEqual([]);
      await context.close();
    });

    const everything = {
      necessary: true,
      Statistics: true,
      Ads: true,
      preferences: true,
      chat: true,
    };
    const ruledRegions = [
      {
        country: "DE",
        state: { jurisdictions: ["eu"], collectedVia: "default_optin", isPending: true },
        categories: ["necessary"],
        update: signals(),
        row: { matchedRuleId: "eu", country: "DE", region: undefined, purposeChoices: undefined },
      },
      {
        country: "GB",
        state: { jurisdictions: ["uk"], collectedVia: "default_notice" },
        categories: ["necessary", "Statistics", "Ads", "preferences", "chat"],
        update: signals(...ANALYTICS, ...ADS, ...FUNCTIONAL),
        row: { matchedRuleId: "uk", country: "GB", region: undefined, purposeChoices: undefined },
      },
      {
        country: "US-CA",
        state: {
          jurisdictions: ["us-ca"],
          collectedVia: "default_optout",
          gpcRespected: true,
          usOptOutChoices: { saleSharing: true, targetedAdvertising: true },
        },
        categories: ["necessary", "Statistics", "preferences", "chat"],
        update: signals(...ANALYTICS, ...FUNCTIONAL),
        row: {
          matchedRuleId: "us-ca",
          country: "US",
          region: "US-CA",
          purposeChoices: { saleSharing: true, targetedAdvertising: true },
        },
      },
    ];
    // One test per region (each a visit with GPC on and the row it writes), and one for the regions
    // no rule names.
    it.each(ruledRegions.map((region) => [region.country, region] as const))(
      "writes %s's default as a consent_default row, honouring GPC under a US rule only, and still asks",
      async (_country, region) => {
        const { publicId, teamId } = await siteBanner({ jurisdictionRules });
        const { context, page } = await visitor({ country: region.country, gpc: true });
        await visit(page, publicId);
        const state = await stateOf(page);
        expect(state).toMatchObject({
          ...region.state,
          categories: region.categories,
          isDefaultState: true,
          revision: 1,
        });
        expect(await dataLayer(page)).toEqual([
          consentDefault,
          ["consent", "update", region.update],
        ]);
        expect(await ran(page)).toEqual(region.categories);
        expect(await dialog(page).count()).toBe(1); // a default is not a choice
        expect(await rowsOf(teamId, 1)).toEqual([
          {
            method: "consent_default",
            consentId: (state as { consentId: string }).consentId,
            preferences: Object.fromEntries(
              Object.keys(everything).map((name) => [name, region.categories.includes(name)]),
            ),
            gpc: true,
            ...region.row,
          },
        ]);
        await context.close();
      },
    );

    it("writes no default for a region no rule names, or a proxy naming no country, and still asks", async () => {
      const { publicId, teamId } = await siteBanner({ jurisdictionRules });
      for (const country of ["JP", "XX", undefined]) {
        const { context, page } = await visitor({ country, gpc: true });
        await visit(page, publicId);
        expect(await stateOf(page)).toBeNull();
        expect(await dataLayer(page)).toEqual([consentDefault]);
        expect(await ran(page)).toEqual(["necessary"]);
        expect(await dialog(page).count()).toBe(1);
        await context.close();
      }
      // Nothing recorded: a row would have arrived by the end of waitForRows' bound.
      expect(await rowsOf(teamId, 1)).toEqual([]);
    });

    it("puts a stored default in effect only under the rule and GPC it was written for", async () => {
      const { publicId, teamId } = await siteBanner({ jurisdictionRules });
      // A California visitor without GPC: everything granted by default.
      const first = await visitor({ country: "US-CA" });
      await visit(first.page, publicId);
      const written = (await stateOf(first.page)) as { consentId: string };
      expect(await ran(first.page)).toEqual([
        "necessary",
        "Statistics",
        "Ads",
        "preferences",
        "chat",
      ]);
      const cookies = await first.context.cookies();
      await first.context.close();
      expect(await rowsOf(teamId, 1)).toMatchObject([
        { method: "consent_default", matchedRuleId: "us-ca", gpc: false },
      ]);

      // Back from California with the same default: it stands, and nothing new is recorded.
      const again = await visitor({ country: "US-CA", cookies });
      await visit(again.page, publicId);
      expect(await stateOf(again.page)).toEqual(written);
      await again.context.close();

      // The same browser in Germany: the EU rule's opt-in default, not California's opt-out one.
      const inGermany = await visitor({ country: "DE", cookies });
      await visit(inGermany.page, publicId);
      expect(await ran(inGermany.page)).toEqual(["necessary"]);
      expect(await dataLayer(inGermany.page)).toEqual([
        consentDefault,
        ["consent", "update", signals()],
      ]);
      expect(await stateOf(inGermany.page)).toMatchObject({
        consentId: written.consentId,
        categories: ["necessary"],
        jurisdictions: ["eu"],
        isDefaultState: true,
        isPending: true,
      });
      await inGermany.context.close();

      // Back in California with GPC turned on since: the advertising categories are off.
      const withGpc = await visitor({ country: "US-CA", gpc: true, cookies });
      await visit(withGpc.page, publicId);
      expect(await ran(withGpc.page)).toEqual(["necessary", "Statistics", "preferences", "chat"]);
      expect(await dataLayer(withGpc.page)).toEqual([
        consentDefault,
        ["consent", "update", signals(...ANALYTICS, ...FUNCTIONAL)],
      ]);
      expect(await stateOf(withGpc.page)).toMatchObject({
        consentId: written.consentId,
        gpcRespected: true,
        usOptOutChoices: { saleSharing: true, targetedAdvertising: true },
      });
      await withGpc.context.close();

      // In Japan, where no rule applies: no default at all, as on a first visit.
      const inJapan = await visitor({ country: "JP", cookies });
      await visit(inJapan.page, publicId);
      expect(await ran(inJapan.page)).toEqual(["necessary"]);
      expect(await dataLayer(inJapan.page)).toEqual([consentDefault]);
      expect(await stateOf(inJapan.page)).toBeNull();
      await inJapan.context.close();

      expect(await rowsOf(teamId, 4)).toMatchObject([
        { method: "consent_default", matchedRuleId: "us-ca", gpc: false },
        { method: "consent_default", matchedRuleId: "eu", consentId: written.consentId },
        {
          method: "consent_default",
          matchedRuleId: "us-ca",
          consentId: written.consentId,
          gpc: true,
          preferences: { Ads: false },
          purposeChoices: { saleSharing: true, targetedAdvertising: true },
        },
      ]);
    });
  },
);
