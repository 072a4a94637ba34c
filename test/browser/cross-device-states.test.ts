import { randomUUID } from "node:crypto";
import type { BrowserContext, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { http } from "#test/support/api.js";
import {
  applyState,
  clearState,
  dialog,
  openVisitor,
  showPreferences,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
} from "#test/support/browser.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { TRUSTED_GEO_HEADER } from "#test/support/loader.js";

const jurisdictionRules = [
  { id: "eu", countries: ["DE"], mode: "opt_in" },
  { id: "us-ca", regions: ["US-CA"], mode: "opt_out" },
  { id: "uk", countries: ["GB"], mode: "notice" },
];

/** What a page's listeners got of consent:ready and consent:change, in order. */
interface ConsentEvent {
  type: string;
  consentState: unknown;
  source?: string;
}

/**
 * The cross-device round trip of docs/banner-runtime.md ("Integrator API") on every path a
 * visitor takes: the state a page exposes (getState, consent:ready, consent:change) is PUT as it
 * is (spec 4.6, 3.2: baseVersion 0, then each returned version), resolves back unchanged (4.5),
 * and applyState of the resolved state on another device exposes it again, with its event.
 */
describe.skipIf(skipBrowserTests)(
  "banner runtime in Chromium: states carried across devices",
  () => {
    const ctx = useBrowserSite(TRUSTED_GEO_HEADER);

    /** A device: a browser context from `country` (the trusted geo header), GPC on if `gpc`. */
    async function device(options: { country?: string; gpc?: boolean } = {}) {
      const { context } = await openVisitor(ctx.browser, options);
      await context.addInitScript(() => {
        const w = window as unknown as { consentEvents: unknown[] };
        w.consentEvents = [];
        for (const type of ["consent:ready", "consent:change"]) {
          addEventListener(type, (event) =>
            w.consentEvents.push({ type, ...(event as CustomEvent).detail }),
          );
        }
      });
      return context;
    }

    /**
     * Opens `url` in the blank tab a device opened with (openVisitor), else in a new page of
     * `context`, once consent:ready has fired.
     */
    async function visit(context: BrowserContext, url: string): Promise<Page> {
      const blank = context.pages().find((page) => page.url() === "about:blank");
      const page = blank ?? (await context.newPage());
      await page.goto(url);
      await page.waitForFunction(() =>
        (window as unknown as { consentEvents: ConsentEvent[] }).consentEvents.some(
          (event) => event.type === "consent:ready",
        ),
      );
      return page;
    }

    const eventsOf = (page: Page) =>
      page.evaluate(() => (window as unknown as { consentEvents: ConsentEvent[] }).consentEvents);

    /**
     * A banner on localhost with the default categories (necessary, analytics, marketing), and a
     * page of the site embedding it in `lang`.
     */
    async function bannerSite(configuration: Record<string, unknown> = {}, lang?: string) {
      const fixture = await bannerFixture(ctx.service, {
        domain: "localhost",
        configuration,
      });
      const path = `/${fixture.publicId}-${lang ?? "en"}`;
      return { ...fixture, url: ctx.site.page(path, { publicId: fixture.publicId, lang }) };
    }

    /**
     * The state the page exposes after a choice on it: getState(), the same as the consent:change
     * (source "choice") it fired last.
     */
    async function chosen(page: Page) {
      const state = await stateOf(page);
      expect(state).not.toBeNull();
      expect((await eventsOf(page)).at(-1)).toEqual({
        type: "consent:change",
        consentState: state,
        source: "choice",
      });
      return state as Record<string, unknown>;
    }

    /** Customize, with only analytics of the optional categories, then Save. */
    async function saveAnalyticsOnly(page: Page, opened = false) {
      if (!opened) await dialog(page).getByRole("button", { name: "Customize" }).click();
      await dialog(page).getByRole("checkbox", { name: "analytics" }).check();
      await dialog(page).getByRole("checkbox", { name: "marketing" }).uncheck();
      await dialog(page).getByRole("button", { name: "Save choices" }).click();
    }

    /**
     * PUTs `consentState` for the subject at `baseVersion` with a consent:write key, and resolves it
     * back: both 200, the version one up, and the state unchanged both ways. The resolved state.
     */
    async function putAndResolve(
      key: string,
      subject: { bannerId: string; subjectId: string },
      baseVersion: number,
      consentState: unknown,
    ) {
      const put = await http(ctx.service, "PUT", "/api/v1/consent/subjects/state", {
        key,
        body: { ...subject, baseVersion, consentState },
      });
      expect(put.status, put.text).toBe(200);
      expect(put.body.data).toMatchObject({
        success: true,
        consentState,
        version: baseVersion + 1,
      });
      const resolved = await http(ctx.service, "POST", "/api/v1/consent/subjects/resolve", {
        key,
        body: subject,
      });
      expect(resolved.status, resolved.text).toBe(200);
      expect(resolved.body.data).toMatchObject({ found: true, version: baseVersion + 1 });
      expect(resolved.body.data.consentState).toEqual(consentState);
      return resolved.body.data.consentState as unknown;
    }

    /**
     * applyState of a resolved state on another device (from `options`' place): getState() is that
     * state, consent:change (source "apply") carries it, and the next page keeps it.
     */
    async function applyOnAnotherDevice(
      url: string,
      state: unknown,
      options: { country?: string; gpc?: boolean } = {},
    ) {
      const context = await device(options);
      const page = await visit(context, url);
      const before = (await eventsOf(page)).length;
      expect(await applyState(page, state)).toBe(true);
      expect(await stateOf(page)).toEqual(state);
      expect((await eventsOf(page)).slice(before)).toEqual([
        { type: "consent:change", consentState: state, source: "apply" },
      ]);
      const next = await visit(context, url);
      expect(await stateOf(next)).toEqual(state);
      expect(await eventsOf(next)).toEqual([{ type: "consent:ready", consentState: state }]);
      await context.close();
    }

    /**
     * One visitor's laptop on a fresh banner's page, and `carry`: PUTs the page's latest choice
     * for the visitor at the next version and applies it on another device. Each choice carried
     * takes two page loads on a device of its own: one test carries a few, not a whole journey.
     */
    async function visitorJourney() {
      const { publicId, key, id, url } = await bannerSite();
      const subject = { bannerId: publicId, subjectId: "user-1842" };
      const laptop = await device();
      const page = await visit(laptop, url);
      expect(await eventsOf(page)).toEqual([{ type: "consent:ready", consentState: null }]);
      let version = 0;
      const carry = async (state: Record<string, unknown>) => {
        const resolved = await putAndResolve(key, subject, version++, state);
        await applyOnAnotherDevice(url, resolved);
        return state;
      };
      return { key, id, url, laptop, page, carry };
    }

    it("carries one visitor's choices: accept, save, reject", async () => {
      const { laptop, page, carry } = await visitorJourney();
      await dialog(page).getByRole("button", { name: "Accept all" }).click();
      const accepted = await carry(await chosen(page));
      expect(accepted).toMatchObject({ acceptType: "all", revision: 1, collectedVia: "banner" });

      await showPreferences(page);
      await saveAnalyticsOnly(page, true);
      expect(await carry(await chosen(page))).toMatchObject({
        categories: ["necessary", "analytics"],
        acceptType: "custom",
        consentId: accepted.consentId,
      });

      await showPreferences(page);
      await dialog(page).getByRole("button", { name: "Reject all" }).click();
      expect(await carry(await chosen(page))).toMatchObject({
        categories: ["necessary"],
        acceptType: "necessary",
      });
      await laptop.close();
    });

    it("carries the choices after one: a re-prompt's, an erasure's new choice, another tab's", async () => {
      const journey = await visitorJourney();
      const { key, id, url, laptop, carry } = journey;
      let { page } = journey;
      // A first choice, as the test above carries it.
      await dialog(page).getByRole("button", { name: "Accept all" }).click();
      const accepted = await chosen(page);

      // A publish raises the revision: the next page asks again, and the new choice is PUT.
      expect(
        (await http(ctx.service, "POST", `/api/v1/banners/${id}/publish`, { key })).status,
      ).toBe(200);
      page = await visit(laptop, url);
      await expect.poll(() => dialog(page).count()).toBe(1);
      await saveAnalyticsOnly(page);
      expect(await carry(await chosen(page))).toMatchObject({
        revision: 2,
        consentId: accepted.consentId,
        consentTimestamp: accepted.consentTimestamp,
      });

      // An erasure on this device, then a new choice under a new consentId.
      await clearState(page);
      expect((await eventsOf(page)).at(-1)).toEqual({
        type: "consent:change",
        consentState: null,
        source: "apply",
      });
      await expect.poll(() => dialog(page).count()).toBe(1);
      await dialog(page).getByRole("button", { name: "Accept all" }).click();
      const renewed = await carry(await chosen(page));
      expect(renewed.consentId).not.toBe(accepted.consentId);

      // A choice made in another tab: this page takes it when focused, as its own listeners hear.
      const other = await visit(laptop, url);
      await showPreferences(other);
      await dialog(other).getByRole("button", { name: "Reject all" }).click();
      const fromOther = await chosen(other);
      await page.evaluate(() => dispatchEvent(new Event("focus")));
      expect(await stateOf(page)).toEqual(fromOther);
      expect((await eventsOf(page)).at(-1)).toEqual({
        type: "consent:change",
        consentState: fromOther,
        source: "other-tab",
      });
      await carry(fromOther);
      await laptop.close();
    });

    // One test per language: each carries a choice through three page loads.
    const texts = Object.fromEntries(
      ["de", "fr", "ar", "pt-BR", "zh-Hant"].map((tag) => [tag, { title: `Privacy ${tag}` }]),
    );
    it.each([
      ["de-AT", "de"],
      ["fr", "fr"],
      ["ar", "ar"],
      ["pt", "pt-BR"],
      ["zh-TW", "zh-Hant"],
      ["ja", "en"],
    ])("carries a choice made on a page in %s, whose texts are %s", async (lang, languageCode) => {
      const { publicId, key, url } = await bannerSite({ texts }, lang);
      const context = await device();
      const page = await visit(context, url);
      await saveAnalyticsOnly(page);
      const state = await chosen(page);
      expect(state.languageCode).toBe(languageCode);
      const subject = { bannerId: publicId, subjectId: `visitor-${lang}` };
      await applyOnAnotherDevice(url, await putAndResolve(key, subject, 0, state));
      await context.close();
    });

    // One test per place (the trusted geo header, GPC on or off): each carries a default and the
    // choice after it through five page loads.
    const places = [
      { name: "DE", country: "DE", expected: { collectedVia: "default_optin", isPending: true } },
      { name: "GB", country: "GB", expected: { collectedVia: "default_notice" } },
      {
        name: "US-CA",
        country: "US-CA",
        expected: { collectedVia: "default_optout", gpcRespected: false },
      },
      {
        name: "US-CA with GPC, under a US rule",
        country: "US-CA",
        gpc: true,
        expected: {
          collectedVia: "default_optout",
          gpcRespected: true,
          categories: ["necessary", "analytics"],
          usOptOutChoices: { saleSharing: true, targetedAdvertising: true },
        },
      },
    ];
    it.each(places.map((place) => [place.name, place] as const))(
      "carries the jurisdiction default from %s, and the choice after it",
      async (_name, place) => {
        const { publicId, key, url } = await bannerSite({ jurisdictionRules });
        const context = await device(place);
        const page = await visit(context, url);
        const state = await stateOf(page);
        expect(state).toMatchObject({ isDefaultState: true, ...place.expected });
        // A default fires no consent:change; consent:ready carries it.
        expect(await eventsOf(page)).toEqual([{ type: "consent:ready", consentState: state }]);
        const subject = { bannerId: publicId, subjectId: `visitor-${place.name}` };
        await applyOnAnotherDevice(url, await putAndResolve(key, subject, 0, state), place);

        await saveAnalyticsOnly(page);
        const choice = await chosen(page);
        expect(choice).toMatchObject({
          acceptType: "custom",
          collectedVia: "banner",
          consentId: (state as { consentId: string }).consentId,
        });
        await applyOnAnotherDevice(url, await putAndResolve(key, subject, 1, choice), place);
        await context.close();
      },
    );

    /** A first choice an integrator's backend wrote through the API, made at `time`. */
    const writtenByBackend = (time: string) => ({
      schemaVersion: 2,
      categories: ["necessary", "analytics"],
      revision: 1,
      acceptType: "custom",
      consentId: randomUUID(),
      consentTimestamp: time,
      lastConsentTimestamp: time,
      languageCode: "en",
      collectedVia: "api",
    });

    /**
     * On a page of `context`, applies a state the backend resolved (getState() is then that state),
     * then Reject all: the choice keeps the resolved first-choice time. The chosen state.
     */
    async function rejectAllAfter(context: BrowserContext, url: string, resolved: unknown) {
      const page = await visit(context, url);
      expect(await applyState(page, resolved)).toBe(true);
      expect(await stateOf(page)).toEqual(resolved);
      await showPreferences(page);
      await dialog(page).getByRole("button", { name: "Reject all" }).click();
      const state = await chosen(page);
      const first = (resolved as { consentTimestamp: string }).consentTimestamp;
      expect(state).toMatchObject({ consentTimestamp: first, acceptType: "necessary" });
      return state;
    }

    it("keeps a choice's time at or after a resolved first choice's finer time within the same millisecond", async () => {
      const { publicId, key, url } = await bannerSite();
      const subject = { bannerId: publicId, subjectId: "from-the-backend" };
      const first = "2026-11-20T10:00:00.123456Z";
      const resolved = await putAndResolve(key, subject, 0, writtenByBackend(first));
      const context = await device();
      await context.clock.setFixedTime(new Date("2026-11-20T10:00:00.123Z"));
      const state = await rejectAllAfter(context, url, resolved);
      await applyOnAnotherDevice(url, await putAndResolve(key, subject, 1, state));
      await context.close();
    });

    it("takes a state with the time forms PUT accepts on a browser whose Date.parse reads only ECMAScript's format", async () => {
      const { publicId, key, url } = await bannerSite();
      const subject = { bannerId: publicId, subjectId: "written-in-lower-case" };
      const first = "2026-11-20t10:00:00.123456789z";
      const resolved = await putAndResolve(key, subject, 0, writtenByBackend(first));
      // Engines need read no other form than YYYY-MM-DDTHH:mm:ss.sssZ (or ±HH:mm); Chromium's reads
      // more, so this device reads only that one.
      const context = await device();
      await context.addInitScript(() => {
        const only = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|[+-]\d{2}:\d{2})$/;
        const parse = Date.parse;
        Date.parse = (text: string) => (only.test(String(text)) ? parse(text) : Number.NaN);
      });
      const state = await rejectAllAfter(context, url, resolved);
      await putAndResolve(key, subject, 1, state);
      await context.close();
    });
  },
);
