import type { Cookie, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  applyState,
  dialog,
  NONCE,
  openVisitor,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
  waitForRows,
} from "#test/support/browser.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { TRUSTED_GEO_HEADER } from "#test/support/loader.js";

const categories = [
  { name: "necessary", required: true },
  { name: "analytics" },
  { name: "marketing" },
];
const jurisdictionRules = [
  { id: "eu", countries: ["DE"], mode: "opt_in" },
  { id: "us-ca", regions: ["US-CA"], mode: "opt_out" },
];
/**
 * After the loader: the page's own listeners (an integrator's, added once the loader ran) and
 * one gated tag per category, each noting in `window.ran` that it ran.
 */
const pageBody = `<script nonce="${NONCE}">
window.consentEvents = [];
for (const type of ["consent:ready", "consent:change"]) {
  addEventListener(type, (event) => window.consentEvents.push({ type, ...event.detail }));
}
</script>
${categories
  .map(
    ({ name }) =>
      `<script type="text/plain" data-category="${name}" nonce="${NONCE}">(window.ran = window.ran || []).push("${name}");</script>`,
  )
  .join("\n")}`;

/**
 * What Global Privacy Control leaves of an Accept all under the US rule: marketing withdrawn and
 * the opt-outs set, the rest of the state (consentId, first time, revision, how it was collected)
 * kept, at a new time.
 */
const optedOutOf = (accepted: Record<string, unknown>) => ({
  ...accepted,
  categories: ["necessary", "analytics"],
  acceptType: "custom",
  gpcRespected: true,
  usOptOutChoices: { saleSharing: true, targetedAdvertising: true },
  lastConsentTimestamp: expect.any(String),
});

interface ConsentEvent {
  type: string;
  source?: string;
  consentState: Record<string, unknown> | null;
}

/**
 * Global Privacy Control turned on after a choice (11 CCR §7025(c)(3), docs/behaviour.md): under
 * a US rule the signal opts the stored choice out of sale and sharing, recorded and announced as a
 * change; a choice made while it is on stands; outside a US rule nothing changes.
 *
 * The tests run side by side: each is one visitor of a banner of its own, in browser contexts of
 * its own, and each waits out waitForRows' bound to show a visit recorded nothing, which one after
 * another would add up to most of the file's time. Side by side on a busy machine, a test may
 * take several times what it takes alone: hence the limit.
 */
describe.skipIf(skipBrowserTests)(
  "banner runtime in Chromium: GPC turned on after a choice",
  { concurrent: true, timeout: 120_000 },
  () => {
    const ctx = useBrowserSite(TRUSTED_GEO_HEADER);

    /** A visit from `country` (the trusted geo header) with the browser's cookies, GPC on if `gpc`. */
    async function visit(
      publicId: string,
      options: { country: string; gpc?: boolean; cookies?: Cookie[] },
    ) {
      const tab = await openVisitor(ctx.browser, options);
      const path = `/${publicId}-${Math.random().toString(36).slice(2)}`;
      await tab.page.goto(ctx.site.page(path, { publicId, body: pageBody }));
      await tab.page.waitForFunction(() =>
        (window as unknown as { consentEvents: ConsentEvent[] }).consentEvents.some(
          (event) => event.type === "consent:ready",
        ),
      );
      await tab.page.waitForTimeout(100); // the gated tags' turn
      return tab;
    }

    /** What the visitor's page shows: state, events, Consent Mode's ad signal, tags run, banner. */
    const seen = (page: Page) =>
      page.evaluate(() => {
        const w = window as unknown as {
          consentEvents: ConsentEvent[];
          dataLayer?: ArrayLike<unknown>[];
          ran?: string[];
        };
        const updates = Array.from(w.dataLayer ?? [], (entry) => Array.from(entry)).filter(
          (entry) => entry[1] === "update",
        );
        return {
          events: w.consentEvents.map(({ type, source }) => ({ type, source })),
          adStorage: updates.map((entry) => (entry[2] as { ad_storage: string }).ad_storage),
          ran: w.ran ?? [],
        };
      });

    /** Accept all on a first visit from `country`, GPC on if `gpc`: the cookies it leaves. */
    async function acceptAll(publicId: string, options: { country: string; gpc?: boolean }) {
      const { context, page } = await visit(publicId, options);
      await dialog(page).getByRole("button", { name: "Accept all" }).click();
      const state = await stateOf(page);
      const cookies = await context.cookies();
      await context.close();
      return { state: state as Record<string, unknown>, cookies };
    }

    const rowsOf = async (teamId: string, count: number) =>
      (await waitForRows(ctx.service, teamId, count)).map((row) => ({
        method: row.method,
        consentId: row.consentId,
        preferences: row.preferences,
        gpc: row.gpc,
        purposeChoices: row.purposeChoices,
      }));

    it("opts a choice made without GPC out of sale and sharing once GPC is on under a US rule, records it, and does not ask again", async () => {
      const { publicId, teamId } = await bannerFixture(ctx.service, {
        domain: "localhost",
        configuration: { categories, jurisdictionRules },
      });
      const accepted = await acceptAll(publicId, { country: "US-CA" });
      expect(accepted.state).toMatchObject({
        acceptType: "all",
        collectedVia: "banner",
        revision: 1,
        gpcRespected: false,
        usOptOutChoices: { saleSharing: false, targetedAdvertising: false },
      });

      // Back with GPC on: marketing is withdrawn before any tag runs, and the banner stays closed.
      const withGpc = await visit(publicId, {
        country: "US-CA",
        gpc: true,
        cookies: accepted.cookies,
      });
      const optedOut = optedOutOf(accepted.state);
      expect(await stateOf(withGpc.page)).toEqual(optedOut);
      expect(await seen(withGpc.page)).toEqual({
        events: [
          { type: "consent:change", source: "choice" },
          { type: "consent:ready", source: undefined },
        ],
        adStorage: ["denied"],
        ran: ["necessary", "analytics"],
      });
      expect(await dialog(withGpc.page).count()).toBe(0);
      expect(withGpc.warnings).toEqual([]);
      // The cookie holds the opt-out: the next page with GPC on keeps it and records nothing new.
      const cookies = await withGpc.context.cookies();
      await withGpc.context.close();
      const next = await visit(publicId, { country: "US-CA", gpc: true, cookies });
      expect(await stateOf(next.page)).toEqual(optedOut);
      expect(await seen(next.page)).toMatchObject({ events: [{ type: "consent:ready" }] });
      await next.context.close();

      // Each row of this visitor's: with marketing or without it, GPC on or off.
      const row = (method: string, marketing: boolean, gpc: boolean) => ({
        method,
        consentId: accepted.state.consentId,
        preferences: { necessary: true, analytics: true, marketing },
        gpc,
        purposeChoices: { saleSharing: !marketing, targetedAdvertising: !marketing },
      });
      // Waits for a fourth row, to show the last visit recorded none.
      expect(await rowsOf(teamId, 4)).toEqual([
        row("consent_default", true, false),
        row("accept_all", true, false),
        row("consent_changed", false, true),
      ]);
    });

    it("opts a state applied from a device without GPC out once it meets GPC under a US rule, announced as a choice", async () => {
      const { publicId, teamId } = await bannerFixture(ctx.service, {
        domain: "localhost",
        configuration: { categories, jurisdictionRules },
      });
      const accepted = await acceptAll(publicId, { country: "US-CA" });
      // Another device, GPC on: the integrator's backend hands in the state resolved for the subject.
      const other = await visit(publicId, { country: "US-CA", gpc: true });
      expect(await applyState(other.page, accepted.state)).toBe(true);
      const optedOut = optedOutOf(accepted.state);
      expect(await stateOf(other.page)).toEqual(optedOut);
      const events = await other.page.evaluate(() =>
        (window as unknown as { consentEvents: ConsentEvent[] }).consentEvents.map(
          ({ type, source, consentState }) => ({ type, source, consentState }),
        ),
      );
      // The applied state, then the opt-out, which an integrator storing each choice stores.
      expect(events.slice(1)).toEqual([
        { type: "consent:change", source: "apply", consentState: accepted.state },
        { type: "consent:change", source: "choice", consentState: optedOut },
      ]);
      expect((await seen(other.page)).adStorage.at(-1)).toBe("denied");
      expect(await dialog(other.page).count()).toBe(0);
      await other.context.close();
      // The other device's own default (GPC on), then the opt-out under the applied consentId,
      // and nothing for the apply itself: waits for a fifth row, to show none came.
      const rows = await rowsOf(teamId, 5);
      const methods = (applied: boolean) =>
        rows
          .filter((row) => (row.consentId === accepted.state.consentId) === applied)
          .map(({ method, gpc }) => ({ method, gpc }));
      expect([methods(true), methods(false)]).toEqual([
        [
          { method: "consent_default", gpc: false },
          { method: "accept_all", gpc: false },
          { method: "consent_changed", gpc: true },
        ],
        [{ method: "consent_default", gpc: true }],
      ]);
    });

    // One test per visitor: each waits out waitForRows' bound once, to show its later visit
    // recorded nothing.
    it.each([
      // Re-consent to sale and sharing while the signal is on (§7025(c)(3)).
      [
        "under a US rule, GPC on",
        { country: "US-CA", gpc: true },
        { country: "US-CA", gpc: true },
        ["consent_default", "accept_all"],
      ],
      // An opt-in rule's choice, GPC on since: no US rule there.
      [
        "under an opt-in rule, GPC on since",
        { country: "DE" },
        { country: "DE", gpc: true },
        ["consent_default", "accept_all"],
      ],
      // No rule at all.
      [
        "under no rule, GPC on since",
        { country: "JP" },
        { country: "JP", gpc: true },
        ["accept_all"],
      ],
    ] as const)(
      "keeps an Accept all made %s, and records nothing more",
      async (_name, first, later, methods) => {
        const { publicId, teamId } = await bannerFixture(ctx.service, {
          domain: "localhost",
          configuration: { categories, jurisdictionRules },
        });
        // A first visit under a rule writes its default, then Accept all: `methods`.
        const accepted = await acceptAll(publicId, first);
        expect(accepted.state.categories).toEqual(["necessary", "analytics", "marketing"]);
        const { context, page } = await visit(publicId, { ...later, cookies: accepted.cookies });
        expect(await stateOf(page)).toEqual(accepted.state);
        expect(await seen(page)).toEqual({
          events: [{ type: "consent:ready", source: undefined }],
          adStorage: ["granted"],
          ran: ["necessary", "analytics", "marketing"],
        });
        expect(await dialog(page).count()).toBe(0);
        await context.close();
        // Nothing recorded on the later visit: a row more would have arrived by the end of
        // waitForRows' bound, waited out after the visit ended.
        const rows = await waitForRows(ctx.service, teamId, methods.length + 1);
        expect(rows.map((row) => [row.consentId, row.method])).toEqual(
          methods.map((method) => [accepted.state.consentId, method]),
        );
      },
    );
  },
);
