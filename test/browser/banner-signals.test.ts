import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { consentState, http } from "#test/support/api.js";
import {
  applyState,
  clearState,
  dialog,
  localBanner,
  NONCE,
  openPage,
  openVisitor,
  showPreferences,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
  waitForRows,
} from "#test/support/browser.js";
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
/** Tags gated on categories, under the page's nonce-only CSP. */
const taggedBody = `
<script type="text/plain" data-category="necessary" nonce="${NONCE}">window.necessaryRan = true;</script>
<script type="text/plain" data-category="analytics" nonce="${NONCE}">window.analyticsRan = true;</script>
<script type="text/plain" data-category="marketing" nonce="${NONCE}">window.marketingRan = true;</script>`;
/** A canonical state (spec 2.4) of revision 1 that the runtime accepts whole. */
const aWholeState = consentState();
const dataLayerHead = `<script nonce="${NONCE}">window.dataLayer = [];</script>`;

/** Consent Mode, script activation, GPC with jurisdiction defaults, and the cross-device API. */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: signals and integrations", () => {
  const ctx = useBrowserSite(TRUSTED_GEO_HEADER);

  /** A banner on localhost (any port) with the file's categories, and more configuration. */
  const siteBanner = (configuration: Record<string, unknown> = {}) =>
    localBanner(ctx.service, categories, configuration);

  /**
   * A fresh page (openPage) on the banner's page of gated tags, once its API is in place: from
   * `country` (the geo header), with GPC on if `gpc`; and the CSP violations reported until then.
   */
  async function openTaggedPage(
    publicId: string,
    options: { country?: string; gpc?: boolean } = {},
  ) {
    const { context, page } = await openVisitor(ctx.browser, options);
    await context.addInitScript(() => {
      (window as unknown as { violations: string[] }).violations = [];
      document.addEventListener("securitypolicyviolation", (event) =>
        (window as unknown as { violations: string[] }).violations.push(event.violatedDirective),
      );
    });
    await page.goto(
      ctx.site.page(`/${publicId}`, { publicId, head: dataLayerHead, body: taggedBody }),
    );
    await page.waitForFunction(() => "consentBanner" in window);
    const violations = await page.evaluate(
      () => (window as unknown as { violations: string[] }).violations,
    );
    return { context, page, violations };
  }

  /** The dataLayer as [command, action, signals] triples (entries are `arguments` objects). */
  const dataLayer = (page: Page) =>
    page.evaluate(() =>
      ((window as unknown as { dataLayer: ArrayLike<unknown>[] }).dataLayer ?? []).map((entry) =>
        Array.from(entry),
      ),
    );
  const ran = (page: Page) =>
    page.evaluate(() => {
      const w = window as unknown as { analyticsRan?: boolean; marketingRan?: boolean };
      return [w.analyticsRan ?? false, w.marketingRan ?? false];
    });

  it("sends Consent Mode default before any tag, update after the choice, and runs accepted tags only", async () => {
    const { publicId, teamId } = await siteBanner();
    const { context, page, violations } = await openTaggedPage(publicId);
    const before = await dataLayer(page);
    expect(before).toEqual([
      [
        "consent",
        "default",
        expect.objectContaining({
          ad_storage: "denied",
          analytics_storage: "denied",
          security_storage: "granted",
          wait_for_update: 500,
        }),
      ],
    ]);
    expect(await ran(page)).toEqual([false, false]);
    // A tag gated on a required category runs before any choice: the category is always on.
    await expect
      .poll(() => page.evaluate(() => (window as { necessaryRan?: boolean }).necessaryRan))
      .toBe(true);
    await dialog(page).getByRole("button", { name: "Customize" }).click();
    await dialog(page).getByRole("checkbox", { name: "analytics" }).check();
    await dialog(page).getByRole("button", { name: "Save choices" }).click();
    expect((await dataLayer(page)).slice(1)).toEqual([
      [
        "consent",
        "update",
        expect.objectContaining({
          analytics_storage: "granted",
          ad_storage: "denied",
          ad_user_data: "denied",
        }),
      ],
    ]);
    await expect.poll(() => ran(page)).toEqual([true, false]);
    await waitForRows(ctx.service, teamId, 1);
    expect(violations).toEqual([]);
    expect(
      await page.evaluate(() => (window as unknown as { violations: string[] }).violations),
    ).toEqual([]);
    await context.close();
  });

  it("writes a jurisdiction default as consent_default, honouring GPC under a US rule", async () => {
    const { publicId, teamId } = await siteBanner({ jurisdictionRules });
    const { context, page } = await openTaggedPage(publicId, { country: "US-CA", gpc: true });
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).toMatchObject({
      method: "consent_default",
      preferences: { necessary: true, analytics: true, marketing: false },
      gpc: true,
      purposeChoices: { saleSharing: true, targetedAdvertising: true },
      matchedRuleId: "us-ca",
      country: "US",
      region: "US-CA",
    });
    expect(await stateOf(page)).toMatchObject({
      isDefaultState: true,
      collectedVia: "default_optout",
      gpcRespected: true,
      jurisdictions: ["us-ca"],
      usOptOutChoices: { saleSharing: true, targetedAdvertising: true },
    });
    expect((await dataLayer(page))[1]).toEqual([
      "consent",
      "update",
      expect.objectContaining({ analytics_storage: "granted", ad_storage: "denied" }),
    ]);
    expect(await ran(page)).toEqual([true, false]);
    expect(await dialog(page).count()).toBe(1); // a default is not a choice: the banner still asks
    await dialog(page).getByRole("button", { name: "Reject all" }).click();
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows[1]).toMatchObject({
      method: "accept_necessary",
      consentId: row?.consentId,
      gpc: true,
    });
    await context.close();

    const eu = await openTaggedPage(publicId, { country: "DE", gpc: true });
    const euRows = await waitForRows(ctx.service, teamId, 3);
    expect(euRows[2]).toMatchObject({
      method: "consent_default",
      preferences: { necessary: true, analytics: false, marketing: false },
      matchedRuleId: "eu",
    });
    expect(euRows[2]?.purposeChoices).toBeUndefined();
    expect(await stateOf(eu.page)).toMatchObject({
      isPending: true,
      collectedVia: "default_optin",
    });
    await eu.context.close();
  });

  it("carries a choice across devices: change event → PUT state → resolve → applyState", async () => {
    const { publicId, teamId, key } = await siteBanner();
    const laptop = await openTaggedPage(publicId);
    const changed = laptop.page.evaluate(
      () =>
        new Promise<{ consentState: unknown; source: string }>((resolve) =>
          window.addEventListener(
            "consent:change",
            (event) => resolve((event as CustomEvent).detail),
            { once: true },
          ),
        ),
    );
    await dialog(laptop.page).getByRole("button", { name: "Customize" }).click();
    await dialog(laptop.page).getByRole("checkbox", { name: "analytics" }).check();
    await dialog(laptop.page).getByRole("button", { name: "Save choices" }).click();
    const { consentState, source } = await changed;
    expect(source).toBe("choice");
    const subject = { bannerId: publicId, subjectId: "user-1842" };
    const put = await http(ctx.service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...subject, baseVersion: 0, consentState },
    });
    expect(put.status).toBe(200);
    const resolved = await http(ctx.service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: subject,
    });
    expect(resolved.body.data.consentState).toEqual(consentState);

    const phone = await openTaggedPage(publicId);
    expect(await dialog(phone.page).count()).toBe(1);
    const applied = await applyState(phone.page, resolved.body.data.consentState);
    expect(applied).toBe(true);
    expect(await dialog(phone.page).count()).toBe(0);
    expect(await stateOf(phone.page)).toEqual(consentState);
    await expect.poll(() => ran(phone.page)).toEqual([true, false]);
    await phone.page.reload();
    await phone.page.waitForFunction(() => "consentBanner" in window);
    expect(await dialog(phone.page).count()).toBe(0);
    expect(await waitForRows(ctx.service, teamId, 1)).toHaveLength(1); // applying records nothing
    await laptop.context.close();
    await phone.context.close();
  });

  it("keeps a choice's time at or after the first one's, made on a device whose clock ran ahead", async () => {
    const { publicId, key, teamId } = await siteBanner();
    const { context, page } = await openTaggedPage(publicId);
    const ahead = new Date(Date.now() + 3 * 60_000).toISOString();
    const fromFastDevice = {
      ...aWholeState,
      consentTimestamp: ahead,
      lastConsentTimestamp: ahead,
    };
    expect(await applyState(page, fromFastDevice)).toBe(true);
    await showPreferences(page);
    await dialog(page).getByRole("button", { name: "Reject all" }).click();
    const state = (await stateOf(page)) as {
      consentTimestamp: string;
      lastConsentTimestamp: string;
    };
    expect(state.consentTimestamp).toBe(ahead);
    expect(Date.parse(state.lastConsentTimestamp)).toBeGreaterThanOrEqual(Date.parse(ahead));
    // The state the change carries is one PUT state takes.
    const put = await http(ctx.service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { bannerId: publicId, subjectId: "fast-clock", baseVersion: 0, consentState: state },
    });
    expect(put.status).toBe(200);
    // The row says when the choice was made here: not the fast device's time, nor clamped.
    const rows = await waitForRows(ctx.service, teamId, 1);
    expect(rows[0]?.timestampClamped).toBe(false);
    expect(Date.parse(String(rows[0]?.occurredAt))).toBeLessThan(Date.parse(ahead) - 60_000);
    await context.close();
  });

  it("forgets this device's state on clearState (an erasure) and asks again under a new consentId", async () => {
    const { publicId, teamId } = await siteBanner();
    const { context, page } = await openTaggedPage(publicId);
    const other = await context.newPage();
    await other.goto(page.url());
    await other.waitForFunction(() => "consentBanner" in window);
    await dialog(page).getByRole("button", { name: "Accept all" }).click();
    const [first] = await waitForRows(ctx.service, teamId, 1);
    // The other tab takes the choice (it is shown again) before the erasure.
    await other.evaluate(() => dispatchEvent(new Event("focus")));
    expect(await stateOf(other)).toMatchObject({ consentId: first?.consentId });
    const change = page.evaluate(
      () =>
        new Promise((resolve) =>
          window.addEventListener(
            "consent:change",
            (event) => resolve((event as CustomEvent).detail),
            {
              once: true,
            },
          ),
        ),
    );
    await clearState(page);
    expect(await change).toEqual({ consentState: null, source: "apply" });
    expect(await stateOf(page)).toBeNull();
    expect((await context.cookies()).filter((c) => c.name.startsWith("consent_"))).toEqual([]);
    await expect.poll(() => dialog(page).count()).toBe(1);
    await dialog(page).getByRole("button", { name: "Reject all" }).click();
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows[1]?.method).toBe("accept_necessary");
    expect(rows[1]?.consentId).not.toBe(first?.consentId);
    // Next page: the new choice, not the erased one.
    await page.reload();
    await page.waitForFunction(() => "consentBanner" in window);
    expect(await dialog(page).count()).toBe(0);
    expect(await stateOf(page)).toMatchObject({ consentId: rows[1]?.consentId });

    // A tab open through the erasure takes it when shown again, and never brings it back.
    await clearState(page);
    await other.evaluate(() => dispatchEvent(new Event("focus")));
    expect(await stateOf(other)).toBeNull();
    await expect.poll(() => dialog(other).count()).toBe(1);
    await dialog(other).getByRole("button", { name: "Accept all" }).click();
    const after = await waitForRows(ctx.service, teamId, 3);
    expect(after[2]?.method).toBe("accept_all");
    expect([first?.consentId, rows[1]?.consentId]).not.toContain(after[2]?.consentId);
    await context.close();
  });

  it("starts over on clearState under a jurisdiction rule as a first visit does: a new default", async () => {
    const { publicId, teamId } = await siteBanner({ jurisdictionRules });
    const { context, page } = await openTaggedPage(publicId, { country: "US-CA" });
    await dialog(page).getByRole("button", { name: "Accept all" }).click();
    const [first] = await waitForRows(ctx.service, teamId, 2);
    await clearState(page);
    const rows = await waitForRows(ctx.service, teamId, 3);
    expect(rows[2]).toMatchObject({ method: "consent_default", matchedRuleId: "us-ca" });
    expect(rows[2]?.consentId).not.toBe(first?.consentId);
    expect(await stateOf(page)).toMatchObject({
      isDefaultState: true,
      consentId: rows[2]?.consentId,
    });
    // The opt-out rule's default (no GPC here) is in effect, not only the required categories.
    expect((await dataLayer(page)).at(-1)).toEqual([
      "consent",
      "update",
      expect.objectContaining({ analytics_storage: "granted", ad_storage: "granted" }),
    ]);
    await expect.poll(() => dialog(page).count()).toBe(1);
    await context.close();
  });

  it("leaves open preferences the visitor opened when a current state is applied", async () => {
    const { publicId } = await siteBanner();
    const { context, page } = await openTaggedPage(publicId);
    await showPreferences(page);
    await expect.poll(() => dialog(page).count()).toBe(1);
    expect(await applyState(page, aWholeState)).toBe(true);
    expect(await dialog(page).count()).toBe(1);
    await context.close();
  });

  it("puts in effect only the banner's categories from an applied state: required ones always", async () => {
    const { publicId } = await siteBanner();
    const { context, page } = await openTaggedPage(publicId);
    // Built elsewhere: no "necessary", and a category this banner does not have.
    const state = { ...aWholeState, categories: ["analytics", "tracking"] };
    expect(await applyState(page, state)).toBe(true);
    expect(await stateOf(page)).toEqual(state); // kept as handed in
    await expect.poll(() => ran(page)).toEqual([true, false]);
    // Tags the page adds afterwards (a single-page app): the required one runs, the other never.
    await page.evaluate((nonce) => {
      for (const [category, flag] of [
        ["necessary", "lateNecessaryRan"],
        ["tracking", "trackingRan"],
      ]) {
        const tag = document.createElement("script");
        Object.assign(tag, { type: "text/plain", nonce, text: `window.${flag} = true;` });
        tag.dataset.category = category;
        document.body.append(tag);
      }
    }, NONCE);
    await expect
      .poll(() => page.evaluate(() => (window as { lateNecessaryRan?: boolean }).lateNecessaryRan))
      .toBe(true);
    expect(await page.evaluate(() => (window as { trackingRan?: boolean }).trackingRan)).toBe(
      undefined,
    );
    await context.close();
  });

  it("refuses a state that is not a whole canonical state, and asks again over a damaged cookie", async () => {
    const { publicId } = await siteBanner();
    const { context, page } = await openTaggedPage(publicId);
    const whole = aWholeState;
    const broken = [
      { ...whole, categories: ["necessary", 42] },
      { ...whole, consentId: "abc" },
      { ...whole, consentTimestamp: "yesterday" },
      { ...whole, acceptType: undefined },
      { ...whole, languageCode: undefined },
      { ...whole, revision: 1.5 },
      { ...whole, gpcRespected: "yes" },
      // What PUT state refuses: unknown fields, opt-outs that are not yes or no.
      { ...whole, evil: "x" },
      { ...whole, usOptOutChoices: { saleSharing: "yes" } },
      { ...whole, usOptOutChoices: [] },
      { ...whole, usOptOutChoices: { resale: true } },
      { ...whole, services: { analytics: "ga" } },
      // More than a cookie holds (about 4 KB): the next page would not find it.
      {
        ...whole,
        categories: Array.from({ length: 50 }, (_, i) => `${i}`.padEnd(100, "x")),
      },
      // A revision above the published one would silence the banner past the next publishes.
      { ...whole, revision: 2 },
    ];
    const apply = (state: unknown) => applyState(page, state);
    const refusals: string[] = [];
    page.on("console", (message) => {
      if (message.text().includes("applyState refused")) refusals.push(message.text());
    });
    for (const state of [...broken, null, "{}"]) expect(await apply(state)).toBe(false);
    expect(await stateOf(page)).toBeNull();
    // Each refusal says why, for the integrator reading the console.
    const why = (reason: string) =>
      `consent banner ${publicId}: applyState refused the state: ${reason}`;
    await expect.poll(() => refusals.length).toBe(broken.length + 2);
    expect(refusals).toEqual([
      why("categories is missing or not valid"),
      why("consentId is missing or not valid"),
      why("consentTimestamp is missing or not valid"),
      why("acceptType is missing or not valid"),
      why("languageCode is missing or not valid"),
      why("revision is missing or not valid"),
      why("gpcRespected is missing or not valid"),
      why("evil is not a field of the consent state"),
      why("usOptOutChoices is missing or not valid"),
      why("usOptOutChoices is missing or not valid"),
      why("usOptOutChoices is missing or not valid"),
      why("services is missing or not valid"),
      why("it is larger than a cookie holds"),
      why("its revision is above the banner's published one, 1"),
      why("it is not an object"),
      why("it is not an object"),
    ]);
    // A state is judged on one reading: a field that reads otherwise the next time (an accessor)
    // is named, not an empty reason.
    expect(
      await page.evaluate((state) => {
        let reads = 0;
        const flipping = { ...state };
        Object.defineProperty(flipping, "consentId", {
          enumerable: true,
          get: () => (reads++ === 0 ? "abc" : state.consentId),
        });
        return (
          window as unknown as { consentBanner: { applyState(s: unknown): boolean } }
        ).consentBanner.applyState(flipping);
      }, whole),
    ).toBe(false);
    await expect.poll(() => refusals.at(-1)).toBe(why("consentId is missing or not valid"));
    expect(await dialog(page).count()).toBe(1);
    // ...and kept as read then: an accessor reading otherwise after the check changes nothing
    // kept, and a state that cannot be read as JSON is refused, saying so.
    const [keptAsJudged, cyclic] = await page.evaluate((state) => {
      const api = (window as unknown as { consentBanner: { applyState(s: unknown): boolean } })
        .consentBanner;
      let reads = 0;
      const turning = { ...state };
      Object.defineProperty(turning, "consentId", {
        enumerable: true,
        get: () => (reads++ === 0 ? state.consentId : "abc"),
      });
      const loop: Record<string, unknown> = { ...state };
      loop.self = loop;
      return [api.applyState(turning), api.applyState(loop)];
    }, whole);
    expect([keptAsJudged, cyclic]).toEqual([true, false]);
    expect(await stateOf(page)).toEqual(whole);
    await expect.poll(() => refusals.at(-1)).toBe(why("it cannot be read as JSON"));
    // The cookie holds the same state: the next page finds it and does not ask.
    await page.reload();
    await page.waitForFunction(() => "consentBanner" in window);
    expect(await stateOf(page)).toEqual(whole);
    expect(await dialog(page).count()).toBe(0);

    // A cookie edited by hand (or written by anything else) counts as no choice.
    const cookie = `consent_${publicId.slice(0, 8)}`;
    await context.addCookies([
      {
        name: cookie,
        value: encodeURIComponent(JSON.stringify(broken[0])),
        url: ctx.site.origin,
      },
    ]);
    await page.reload();
    await page.waitForFunction(() => "consentBanner" in window);
    expect(await dialog(page).count()).toBe(1);
    expect(await apply(whole)).toBe(true);
    expect(await dialog(page).count()).toBe(0);
    await context.close();
  });

  it("has its API in place when consent:ready fires, even for a deferred loader", async () => {
    const { publicId } = await siteBanner();
    const { context, page } = await openPage(ctx.browser);
    await context.addInitScript(() => {
      const w = window as unknown as { apiAtReady?: string; consentBanner?: unknown };
      window.addEventListener("consent:ready", () => {
        w.apiAtReady = typeof w.consentBanner;
      });
    });
    // Deferred: the loader runs once the page is parsed, so the page is ready as it starts.
    await page.goto(
      ctx.site.page(`/deferred-${publicId}`, { publicId, loaderAttributes: "defer" }),
    );
    await page.waitForFunction(() => "apiAtReady" in window);
    expect(
      await page.evaluate(() => (window as unknown as { apiAtReady: string }).apiAtReady),
    ).toBe("object");
    await context.close();
  });
  it("starts one banner per page: a second loader on it warns and starts nothing", async () => {
    const { publicId, teamId } = await siteBanner({ layout: "modal" });
    const { context, page, warnings } = await openPage(ctx.browser);
    // The same tag pasted a second time, further down the page.
    const again = `<script src="${ctx.service.gatewayUrl}/loader/${publicId}.js?again" nonce="${NONCE}"></script>`;
    await page.goto(ctx.site.page(`/twice-${publicId}`, { publicId, body: again }));
    await page.waitForFunction(() => "consentBanner" in window);
    await expect.poll(() => warnings.some((text) => text.includes("already runs"))).toBe(true);
    expect(await page.locator(`[id^=consent-banner-]`).count()).toBe(1);
    expect(
      await page.evaluate(
        () => (window as unknown as { consentBanner: { bannerId: string } }).consentBanner.bannerId,
      ),
    ).toBe(publicId);
    // The one modal keeps focus and takes the choice, recorded once.
    await page.keyboard.press("Tab");
    await page.keyboard.press("Enter");
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows.map((row) => row.preferences)).toEqual([
      { necessary: true, analytics: true, marketing: true },
    ]);
    expect(await dialog(page).count()).toBe(0);
    expect(warnings.filter((text) => !text.includes("already runs"))).toEqual([]);
    await context.close();
  });
  it("takes the place of anything else named consentBanner: an element, a placeholder, a frame", async () => {
    const { publicId } = await siteBanner({ layout: "modal" });
    const pages = {
      // A deferred loader runs after the element exists, which window.consentBanner then names.
      element: { loaderAttributes: "defer", body: `<div id="consentBanner"></div>` },
      placeholder: {
        head: `<script nonce="${NONCE}">window.consentBanner = { queue: [] };</script>`,
      },
      // A frame of another origin, which refuses to have its properties read.
      // (Placed before the loader's tag, which then runs in the body after it.)
      frame: { head: `<iframe name="consentBanner" src="data:text/html,hi"></iframe>` },
    };
    for (const [name, markup] of Object.entries(pages)) {
      const { context, page, warnings } = await openPage(ctx.browser);
      await page.goto(ctx.site.page(`/named-${name}-${publicId}`, { publicId, ...markup }));
      await dialog(page).waitFor();
      expect(
        await page.evaluate(
          () =>
            (window as unknown as { consentBanner: { bannerId?: string } }).consentBanner.bannerId,
        ),
        name,
      ).toBe(publicId);
      expect(
        warnings.filter((text) => text.includes("already runs")),
        name,
      ).toEqual([]);
      await context.close();
    }
  });
  it("keeps the banner closed when a current state is applied before the page is ready", async () => {
    const { publicId, teamId } = await siteBanner({ layout: "modal" });
    const state = aWholeState;
    ctx.site.file(
      "/apply.js",
      "text/javascript",
      `window.appliedEarly = [document.readyState, consentBanner.applyState(${JSON.stringify(state)})];`,
    );
    const { context, page } = await openPage(ctx.browser);
    await page.goto(
      ctx.site.page(`/early-${publicId}`, {
        publicId,
        body: `<script src="/apply.js" nonce="${NONCE}"></script>`,
      }),
    );
    await page.waitForLoadState("load");
    expect(
      await page.evaluate(() => (window as unknown as { appliedEarly: unknown }).appliedEarly),
    ).toEqual(["loading", true]);
    expect(await dialog(page).count()).toBe(0);
    expect(await page.evaluate(() => getComputedStyle(document.documentElement).overflow)).toBe(
      "visible",
    );
    expect(await stateOf(page)).toEqual(state);
    // Applying recorded nothing: the one row there is comes from a choice made afterwards.
    await showPreferences(page);
    await dialog(page).getByRole("button", { name: "Save choices" }).click();
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows.map((row) => row.method)).toEqual(["consent_changed"]);
    await context.close();
  });

  it("runs gated scripts in page order, past one that fails, under Trusted Types, and records the choice first", async () => {
    const { publicId, teamId } = await siteBanner();
    ctx.site.file("/lib.js", "text/javascript", "window.order.push('lib'); window.Lib = {};");
    for (const category of ["analytics", "unknown"]) {
      ctx.site.file(
        `/late-${category}.js`,
        "text/javascript",
        `window.order.push('late ${category}');`,
      );
    }
    const gated = [
      `<script nonce="${NONCE}">window.order = [];</script>`,
      `<script type="text/plain" data-category="analytics" src="/lib.js" nonce="${NONCE}"></script>`,
      `<script type="text/plain" data-category="analytics" nonce="${NONCE}">window.order.push('after lib: ' + typeof Lib);</script>`,
      `<script type="text/plain" data-category="analytics" src="/missing.js" nonce="${NONCE}"></script>`,
      `<script type="text/plain" data-category="analytics" nonce="${NONCE}">throw new Error('broken tag');</script>`,
      `<script type="text/plain" data-category="analytics" nonce="${NONCE}">window.order.push('last');</script>`,
    ].join("\n");
    const { context, page } = await openPage(ctx.browser);
    await page.goto(
      ctx.site.page(`/ordered-${publicId}`, {
        publicId,
        body: gated,
        csp: "require-trusted-types-for 'script'",
      }),
    );
    await page.waitForFunction(() => "consentBanner" in window);
    await dialog(page).getByRole("button", { name: "Accept all" }).click();
    await expect
      .poll(() => page.evaluate(() => (window as unknown as { order: string[] }).order))
      .toEqual(["lib", "after lib: object", "last"]);
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.method).toBe("accept_all");
    // A gated script the page adds later (a single-page app) runs as it arrives, if accepted.
    await page.evaluate((nonce) => {
      // The page enforces Trusted Types: its own code sets a src through a policy of its own.
      const policy = (
        window as unknown as {
          trustedTypes: {
            createPolicy(n: string, p: object): { createScriptURL(u: string): string };
          };
        }
      ).trustedTypes.createPolicy("page", { createScriptURL: (url: string) => url });
      for (const category of ["analytics", "unknown"]) {
        const script = document.createElement("script");
        script.type = "text/plain";
        script.dataset.category = category;
        script.nonce = nonce;
        script.src = policy.createScriptURL(`/late-${category}.js`);
        document.body.append(script);
      }
    }, NONCE);
    await expect
      .poll(() => page.evaluate(() => (window as unknown as { order: string[] }).order))
      .toEqual(["lib", "after lib: object", "last", "late analytics"]);
    // A second choice runs nothing twice.
    await showPreferences(page);
    await dialog(page).getByRole("button", { name: "Accept all" }).click();
    expect(await waitForRows(ctx.service, teamId, 2)).toHaveLength(2);
    expect(await page.evaluate(() => (window as unknown as { order: string[] }).order)).toEqual([
      "lib",
      "after lib: object",
      "last",
      "late analytics",
    ]);
    await context.close();
  });
});
