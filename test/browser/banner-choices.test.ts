import type { Locator } from "playwright-core";
import { describe, expect, it } from "vitest";
import { consentState, http } from "#test/support/api.js";
import {
  applyState,
  clearState,
  dialog,
  launchChromium,
  NONCE,
  openPage,
  type SitePage,
  showPreferences,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
  useTestPage,
  waitForRows,
} from "#test/support/browser.js";
import { bannerFixture, labelledCategories } from "#test/support/consent-log.js";

const categories = labelledCategories;
/** What a page of the site holds besides the loader (its markup, its lang, its CSP). */
type PageMarkup = Omit<SitePage, "publicId">;

/** A state an integrator's backend resolved and hands in (cross-device). */
const handedIn = consentState({ categories: ["necessary"], acceptType: "necessary" });

/** The banner in real Chromium: layouts, the three choices, the keyboard, re-prompts, texts. */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: layouts and choices", () => {
  const ctx = useBrowserSite();
  const tab = useTestPage(() => ctx.browser);

  /**
   * A banner on localhost (any port) and a page of the site embedding it: by default with a slot
   * for an inline box, else with the markup `page` gives (or makes of the banner's publicId).
   */
  async function bannerSite(
    configuration: Record<string, unknown> = {},
    page: PageMarkup | ((publicId: string) => PageMarkup) = {},
  ) {
    const fixture = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories, ...configuration },
    });
    const url = ctx.site.page(`/${fixture.publicId}`, {
      publicId: fixture.publicId,
      body: "<div data-consent-banner></div><p>Page content</p>",
      ...(typeof page === "function" ? page(fixture.publicId) : page),
    });
    return { ...fixture, url };
  }

  /** bannerSite's page, opened in the test's page. */
  async function bannerPage(...args: Parameters<typeof bannerSite>) {
    const banner = await bannerSite(...args);
    await tab.page.goto(banner.url);
    return banner;
  }

  /**
   * bannerSite's page in an iframe (with `attributes`) of a page served from `origin`, once the
   * banner's dialog shows in it: that dialog, and the frame.
   */
  async function framedBannerPage({ attributes = "", origin = ctx.site.origin } = {}) {
    const { publicId, url } = await bannerSite();
    ctx.site.file(
      `/outer-${publicId}`,
      "text/html",
      `<!doctype html><html lang="en"><body><iframe ${attributes} src="${url}"></iframe></body></html>`,
    );
    await tab.page.goto(`${origin}/outer-${publicId}`);
    const framed = tab.page.frameLocator("iframe").locator("[id^=consent-banner-] [role=dialog]");
    await expect.poll(() => framed.count()).toBe(1);
    const frame = tab.page.frames().find((f) => f.url() === url);
    if (!frame) throw new Error("the framed page did not load");
    return { framed, frame };
  }

  it("renders each layout at its position, in the configured colours", async () => {
    const layouts = [
      ["banner", "bottom", "fixed", "false"],
      ["modal", "center", "fixed", "true"],
      ["inline", "top", "static", "false"],
    ] as const;
    for (const [layout, position, cssPosition, modal] of layouts) {
      await bannerPage({ layout, position, secondaryColor: "#fafafa", primaryColor: "#123456" });
      const panel = dialog(tab.page);
      await expect.poll(() => panel.count()).toBe(1);
      const style = await panel.evaluate((element) => {
        const s = getComputedStyle(element);
        return [s.position, s.backgroundColor, element.getAttribute("aria-modal")];
      });
      expect(style).toEqual([cssPosition, "rgb(250, 250, 250)", modal]);
      const button = await panel
        .getByRole("button", { name: "Accept all" })
        .evaluate((element) => getComputedStyle(element).backgroundColor);
      expect(button).toBe("rgb(18, 52, 86)");
      if (layout === "inline") {
        expect(await tab.page.locator("[data-consent-banner] [role=dialog]").count()).toBe(1);
      }
    }
    expect(tab.warnings).toEqual([]);
  });

  it("records Accept all, Reject all and Customize as the right rows", async () => {
    const choices = [
      ["Accept all", "accept_all", { necessary: true, analytics: true, marketing: true }, "all"],
      [
        "Reject all",
        "accept_necessary",
        { necessary: true, analytics: false, marketing: false },
        "necessary",
      ],
    ] as const;
    for (const [button, method, preferences, acceptType] of choices) {
      const { teamId } = await bannerPage();
      await dialog(tab.page).getByRole("button", { name: button }).click();
      const [row] = await waitForRows(ctx.service, teamId, 1);
      expect(row).toMatchObject({
        method,
        preferences,
        revision: 1,
        languageCode: "en",
        gpc: false,
      });
      expect(row?.pageUrl).toBe(ctx.site.origin);
      expect(await dialog(tab.page).count()).toBe(0);
      expect(await stateOf(tab.page)).toMatchObject({ acceptType, consentId: row?.consentId });
    }
    const { teamId } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
    await dialog(tab.page)
      .getByRole("checkbox", { name: /Analytics/ })
      .check();
    expect(
      await dialog(tab.page)
        .getByRole("checkbox", { name: /Necessary/ })
        .isDisabled(),
    ).toBe(true);
    await dialog(tab.page).getByRole("button", { name: "Save choices" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).toMatchObject({
      method: "consent_given",
      preferences: { necessary: true, analytics: true, marketing: false },
    });
    expect(await stateOf(tab.page)).toMatchObject({
      schemaVersion: 2,
      categories: ["necessary", "analytics"],
      acceptType: "custom",
      collectedVia: "banner",
    });
  });

  it("records Reject all as necessary and names each box by its label alone when every category is required", async () => {
    const { teamId } = await bannerPage({
      categories: [
        { name: "necessary", required: true, label: "Necessary", description: "Needed." },
      ],
    });
    await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
    // Its name is the label and why it is locked; the description describes it.
    const box = dialog(tab.page).getByRole("checkbox", {
      name: "Necessary Always on",
      exact: true,
    });
    expect(await box.count()).toBe(1);
    const description = await box.evaluate((b) => {
      const id = b.getAttribute("aria-describedby") ?? "";
      return (b.getRootNode() as ShadowRoot).getElementById(id)?.textContent;
    });
    expect(description).toBe("Needed.");
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.method).toBe("accept_necessary");
    expect(await stateOf(tab.page)).toMatchObject({ acceptType: "necessary" });
  });

  it("carries a choice made in another tab: the next one is consent_changed under the same consentId", async () => {
    const { teamId, url } = await bannerPage();
    const other = await tab.context.newPage();
    await other.goto(url);
    await expect.poll(() => dialog(other).count()).toBe(1);
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const [first] = await waitForRows(ctx.service, teamId, 1);
    await dialog(other).getByRole("button", { name: "Accept all" }).click();
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows.map((r) => [r.method, r.consentId])).toEqual([
      ["accept_necessary", first?.consentId],
      ["consent_changed", first?.consentId],
    ]);
    expect(await stateOf(other)).toMatchObject({
      acceptType: "all",
      consentId: first?.consentId,
      consentTimestamp: ((await stateOf(tab.page)) as { consentTimestamp: string })
        .consentTimestamp,
    });
  });

  it("takes another tab's choice when focused: a prompt closes, re-opened preferences stay, and consent:change fires", async () => {
    const { url } = await bannerPage();
    const [prompted, preferring] = [await tab.context.newPage(), await tab.context.newPage()];
    for (const other of [prompted, preferring]) {
      await other.goto(url);
      await expect.poll(() => dialog(other).count()).toBe(1);
      await other.evaluate(() =>
        addEventListener("consent:change", (event) => {
          const w = window as { changes?: unknown[] };
          w.changes = [...(w.changes ?? []), (event as CustomEvent).detail.consentState.acceptType];
        }),
      );
    }
    await dialog(preferring).getByRole("button", { name: "Customize" }).click();
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    // Shown again after the choice in the first tab (two windows side by side: focus).
    for (const other of [prompted, preferring]) {
      await other.evaluate(() => dispatchEvent(new Event("focus")));
      expect(await other.evaluate(() => (window as { changes?: unknown[] }).changes)).toEqual([
        "all",
      ]);
      expect(await stateOf(other)).toMatchObject({ acceptType: "all" });
    }
    expect(await dialog(prompted).count()).toBe(0);
    // The first view switched to Customize is still the prompt the choice answered.
    expect(await dialog(preferring).count()).toBe(0);
    // Preferences the visitor re-opened are theirs to close.
    await showPreferences(preferring);
    await expect.poll(() => dialog(preferring).count()).toBe(1);
    // A change of mind in the first tab:
    await showPreferences(tab.page);
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    await preferring.evaluate(() => dispatchEvent(new Event("focus")));
    expect(await stateOf(preferring)).toMatchObject({ acceptType: "necessary" });
    expect(await dialog(preferring).count()).toBe(1);
  });

  it("asks again after an erasure in another tab, also where the visitor closed preferences with Escape", async () => {
    const { url } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    const other = await tab.context.newPage();
    await other.goto(url);
    await other.waitForFunction(() => "consentBanner" in window);
    expect(await dialog(other).count()).toBe(0);
    // The visitor looks at their choice and leaves it as it is.
    await showPreferences(other);
    await expect.poll(() => dialog(other).count()).toBe(1);
    await dialog(other).press("Escape");
    expect(await dialog(other).count()).toBe(0);
    // The integrator erases the subject through the first tab; the other is shown again.
    await clearState(tab.page);
    await other.evaluate(() => dispatchEvent(new Event("focus")));
    expect(await stateOf(other)).toBeNull();
    await expect.poll(() => dialog(other).count()).toBe(1);
    expect(await dialog(other).getByRole("button", { name: "Accept all" }).isVisible()).toBe(true);
  });

  it("puts in effect a choice made while the page waited in the back/forward cache", async () => {
    const browser = await launchChromium({ backForwardCache: true });
    try {
      const { publicId, teamId, url: next } = await bannerSite();
      const first = ctx.site.page(`/first-${publicId}`, {
        publicId,
        body: `<a id="next" href="${next}">Next</a>`,
      });
      const visitor = await browser.newPage();
      await visitor.addInitScript(() =>
        addEventListener("pageshow", (event) => {
          (window as { restored?: boolean }).restored = event.persisted;
        }),
      );
      await visitor.goto(first);
      await expect.poll(() => dialog(visitor).count()).toBe(1);
      await visitor.click("#next");
      await visitor.waitForURL(next);
      await dialog(visitor).getByRole("button", { name: "Reject all" }).click();
      const [row] = await waitForRows(ctx.service, teamId, 1);
      await visitor.goBack({ waitUntil: "commit" });
      // Restored from the cache, not loaded again: the runtime did not start over.
      await visitor.waitForFunction(() => (window as { restored?: boolean }).restored === true, {
        timeout: 10_000,
      });
      await expect.poll(() => dialog(visitor).count()).toBe(0);
      expect(await stateOf(visitor)).toMatchObject({
        acceptType: "necessary",
        consentId: row?.consentId,
      });
    } finally {
      await browser.close();
    }
  });

  it("does not hold back the gated scripts after one marked async", async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    ctx.site.file("/slow.js", "text/javascript", "window.slowRan = true;");
    await tab.context.route("**/slow.js", async (route) => {
      await held;
      await route.continue();
    });
    await bannerPage(
      {},
      {
        body: `<script type="text/plain" data-category="analytics" src="/slow.js" async nonce="${NONCE}"></script>
<script type="text/plain" data-category="analytics" nonce="${NONCE}">window.afterRan = true;</script>`,
      },
    );
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    await expect
      .poll(() => tab.page.evaluate(() => (window as { afterRan?: boolean }).afterRan))
      .toBe(true);
    expect(
      await tab.page.evaluate(() => (window as { slowRan?: boolean }).slowRan),
    ).toBeUndefined();
    release();
    await expect
      .poll(() => tab.page.evaluate(() => (window as { slowRan?: boolean }).slowRan))
      .toBe(true);
  });

  it("comes back when the page renders its body anew, until the visitor chooses", async () => {
    await bannerPage({ layout: "modal" });
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    const overflow = () => tab.page.evaluate(() => document.documentElement.style.overflow);
    // A framework's render that drops what it did not make.
    await tab.page.evaluate(() => document.querySelector("[id^=consent-banner-]")?.remove());
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    expect(await overflow()).toBe("hidden");
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    expect(await dialog(tab.page).count()).toBe(0);
    expect(await overflow()).toBe("");

    // An inline banner whose slot is rendered anew goes into the new one.
    await bannerPage({ layout: "inline" });
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await tab.page.evaluate(() => {
      const slot = document.createElement("div");
      slot.dataset.consentBanner = "";
      slot.id = "new-slot";
      document.querySelector("[data-consent-banner]")?.replaceWith(slot);
    });
    await expect.poll(() => tab.page.locator("#new-slot [role=dialog]").count()).toBe(1);
  });

  it("comes back when the page puts a new <body> in place (Turbo's visits), in every layout", async () => {
    const newBody = (withSlot: boolean) =>
      tab.page.evaluate((slot) => {
        const body = document.createElement("body");
        body.innerHTML = `${slot ? '<div data-consent-banner id="next-slot"></div>' : ""}<p>Next page</p>`;
        document.body.replaceWith(body);
      }, withSlot);
    await bannerPage({ layout: "modal" });
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await newBody(false);
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    expect(await tab.page.evaluate(() => document.documentElement.style.overflow)).toBe("");

    await bannerPage({ layout: "banner", position: "bottom" });
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await newBody(false);
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    // The new body keeps the banner's room at the bottom, and gets its own back after the choice.
    const room = () =>
      tab.page.evaluate(() => [
        document.body.style.paddingBottom !== "",
        document.documentElement.style.scrollPaddingBottom !== "",
      ]);
    await expect.poll(room).toEqual([true, true]);
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    expect(await room()).toEqual([false, false]);

    await bannerPage({ layout: "inline" });
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await newBody(true);
    await expect.poll(() => tab.page.locator("#next-slot [role=dialog]").count()).toBe(1);
  });

  it("re-opened preferences speak the language the page has now (a single-page app switched it)", async () => {
    const texts = { de: { title: "Ihre Privatsphäre", save: "Speichern" } };
    const { teamId } = await bannerPage({ texts });
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    await tab.page.evaluate(() => {
      document.documentElement.lang = "de";
    });
    await showPreferences(tab.page);
    await expect
      .poll(() => dialog(tab.page).getByRole("heading").textContent())
      .toBe("Ihre Privatsphäre");
    await dialog(tab.page).getByRole("button", { name: "Speichern" }).click();
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows.map((row) => [row.method, row.languageCode])).toEqual([
      ["accept_all", "en"],
      ["consent_changed", "de"],
    ]);
  });

  it("works with the keyboard alone, and traps focus in the modal", async () => {
    const { teamId } = await bannerPage({ layout: "modal" });
    const focused = () =>
      tab.page.evaluate(() => {
        const host = document.activeElement;
        const inner = host?.shadowRoot?.activeElement;
        return inner ? inner.textContent || (inner as HTMLInputElement).name : host?.tagName;
      });
    const focusedRole = () =>
      tab.page.evaluate(() =>
        document.activeElement?.shadowRoot?.activeElement?.getAttribute("role"),
      );
    // The modal opens on the dialog itself: no choice is preselected.
    await expect.poll(focusedRole).toBe("dialog");
    // Focus a page script pulls out of the modal comes back to the dialog, not to a choice.
    await tab.page.evaluate(() =>
      (document.querySelector('a[href="#top"]') as HTMLElement).focus(),
    );
    expect(await focusedRole()).toBe("dialog");
    await tab.page.keyboard.press("Shift+Tab");
    expect(await focused()).toBe("Customize"); // wrapped to the last control
    await tab.page.keyboard.press("Tab");
    expect(await focused()).toBe("Accept all");
    await tab.page.keyboard.press("Tab");
    await tab.page.keyboard.press("Tab");
    expect(await focused()).toBe("Customize");
    await tab.page.keyboard.press("Tab");
    expect(await focused()).toBe("Accept all"); // wrapped inside the dialog
    await tab.page.keyboard.press("Shift+Tab");
    expect(await focused()).toBe("Customize");
    await tab.page.keyboard.press("Enter");
    expect(await focused()).toBe("analytics");
    await tab.page.keyboard.press("Space");
    await tab.page.keyboard.press("Tab");
    await tab.page.keyboard.press("Space");
    await tab.page.keyboard.press("Shift+Tab");
    await tab.page.keyboard.press("Space");
    for (const key of ["Tab", "Tab", "Tab", "Tab"]) await tab.page.keyboard.press(key);
    expect(await focused()).toBe("Save choices");
    await tab.page.keyboard.press("Enter");
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.preferences).toEqual({ necessary: true, analytics: false, marketing: true });
  });

  // Regression: a click on the modal's backdrop left focus on <body>, outside the dialog, where
  // Escape no longer reached it and re-opened preferences stayed open.
  it("keeps focus in the modal when the visitor clicks its backdrop, so Escape still closes it", async () => {
    await bannerPage({ layout: "modal" });
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    await tab.page.locator('a[href="#top"]').focus();
    await showPreferences(tab.page);
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    // The top left corner of the window: the backdrop, well clear of the centred dialog.
    await tab.page.mouse.click(2, 2);
    const inDialog = () =>
      tab.page.evaluate(
        () => !!document.activeElement?.shadowRoot?.activeElement?.closest("[role=dialog]"),
      );
    expect(await inDialog()).toBe(true);
    await tab.page.keyboard.press("Escape");
    await expect.poll(() => dialog(tab.page).count()).toBe(0);
    expect(await tab.page.evaluate(() => document.activeElement?.getAttribute("href"))).toBe(
      "#top",
    );
  });

  it("holds the page still behind a modal, and lets it scroll again after the choice", async () => {
    await bannerPage({ layout: "modal" });
    const overflow = () =>
      tab.page.evaluate(() => getComputedStyle(document.documentElement).overflow);
    await tab.page.waitForFunction(() => "consentBanner" in window);
    expect(await overflow()).toBe("hidden");
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    expect(await overflow()).toBe("visible");
  });

  it("keeps a keyboard user's focus clear of a banner fixed to the bottom, and gives the room back", async () => {
    await tab.page.setViewportSize({ width: 375, height: 667 });
    const filler = Array.from({ length: 40 }, (_, i) => `<p>Paragraph ${i}</p>`).join("");
    await bannerPage(
      { layout: "banner", position: "bottom" },
      { body: `${filler}<footer><a id="end" href="#privacy">Privacy</a></footer>` },
    );
    await tab.page.waitForFunction(() => "consentBanner" in window);
    for (let i = 0; i < 20; i++) {
      await tab.page.keyboard.press("Tab");
      if (await tab.page.evaluate(() => document.activeElement?.id === "end")) break;
    }
    const overlap = () =>
      tab.page.evaluate(() => {
        const link = document.getElementById("end")?.getBoundingClientRect();
        const banner = document
          .querySelector("[id^=consent-banner-]")
          ?.shadowRoot?.querySelector("[role=dialog]")
          ?.getBoundingClientRect();
        return {
          focused: document.activeElement?.id,
          linkBottom: link?.bottom,
          bannerTop: banner?.top,
        };
      });
    const seen = await overlap();
    expect(seen.focused).toBe("end");
    expect(seen.linkBottom).toBeLessThanOrEqual(seen.bannerTop as number);
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    expect(
      await tab.page.evaluate(() => [
        document.body.style.paddingBottom,
        document.documentElement.style.scrollPaddingBottom,
      ]),
    ).toEqual(["", ""]);
  });

  it("asks again only after a publish raises the revision, keeping the consentId", async () => {
    const { teamId, key, id, url } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    const [first] = await waitForRows(ctx.service, teamId, 1);
    await tab.page.goto(url);
    await tab.page.waitForFunction(() => "consentBanner" in window);
    expect(await dialog(tab.page).count()).toBe(0);
    await http(ctx.service, "POST", `/api/v1/banners/${id}/publish`, { key });
    await tab.page.goto(url);
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const rows = await waitForRows(ctx.service, teamId, 2);
    expect(rows[1]).toMatchObject({
      method: "consent_changed",
      revision: 2,
      consentId: first?.consentId,
    });
  });

  it("records a choice the browser will not keep in a cookie, and says why it asks again", async () => {
    // Cookies blocked for the site: the browser drops every write.
    await tab.context.addInitScript(() =>
      Object.defineProperty(Document.prototype, "cookie", {
        configurable: true,
        get: () => "",
        set: () => {},
      }),
    );
    const { teamId } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.method).toBe("accept_all");
    expect(tab.warnings).toEqual([expect.stringMatching(/did not keep the consent cookie/)]);
    await tab.page.reload();
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
  });

  it("runs in a frame sandboxed without allow-same-origin, where the page has no cookies at all", async () => {
    const { framed, frame } = await framedBannerPage({ attributes: 'sandbox="allow-scripts"' });
    await framed.getByRole("button", { name: "Accept all" }).click();
    await expect.poll(() => framed.count()).toBe(0);
    expect(await stateOf(frame)).toMatchObject({
      categories: ["necessary", "analytics", "marketing"],
      acceptType: "all",
    });
    // An integrator's state holds for the page it is handed to, the only place it can.
    expect(await applyState(frame, handedIn)).toBe(true);
    expect(await stateOf(frame)).toEqual(handedIn);
    expect(tab.warnings).toContainEqual(expect.stringMatching(/did not keep the consent cookie/));
    expect(tab.warnings).toContainEqual(
      expect.stringMatching(
        /keeps no cookies for this page, so the applied state holds for this page only/,
      ),
    );
    expect(tab.warnings.filter((w) => /SecurityError|sandboxed/.test(w))).toEqual([]);
  });

  it("records choices however the loader is embedded, its address never taken from markup: a module, or fetched and run by a tag manager", async () => {
    // Markup an injection could have put in the page: a decoy tag and a request naming the
    // loader's path, neither of which may decide where choices go, and a gated script without
    // the page's nonce.
    const injected = (publicId: string) =>
      `<script type="text/plain" src="http://127.0.0.1:9/loader/${publicId}.js"></script>` +
      `<img alt="" src="/pixel?u=/loader/${publicId}.js"><img alt="" src="/elsewhere/loader/${publicId}.js">` +
      `<script type="text/plain" data-category="necessary">window.injectedRan = true;</script>`;
    const gated = `<script type="text/plain" data-category="necessary" nonce="${NONCE}">window.gatedRan = true;</script>`;
    const embeddings = [
      // No tag of its own while it runs: its nonce cannot be known, so no gated script runs.
      { loaderAttributes: 'type="module"', gatedRun: false },
      {
        noLoaderTag: true,
        head: (publicId: string) =>
          `${injected(publicId)}<script nonce="${NONCE}">addEventListener("load", () => fetch("${ctx.service.gatewayUrl}/loader/${publicId}.js").then((r) => r.text()).then((text) => { const s = document.createElement("script"); s.nonce = "${NONCE}"; s.text = text; document.head.append(s); }));</script>`,
        gatedRun: true,
      },
    ];
    for (const { head, gatedRun, ...embedding } of embeddings) {
      tab.warnings.length = 0;
      const { teamId } = await bannerPage({}, (publicId) => ({
        body: gated,
        head: head?.(publicId) ?? injected(publicId),
        ...embedding,
      }));
      await expect.poll(() => dialog(tab.page).count()).toBe(1);
      await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
      const [row] = await waitForRows(ctx.service, teamId, 1);
      const what = JSON.stringify(embedding);
      expect([what, row?.method]).toEqual([what, "accept_all"]);
      const ran = await tab.page.evaluate(() => {
        const w = window as { gatedRan?: boolean; injectedRan?: boolean };
        return [w.gatedRan ?? false, w.injectedRan ?? false];
      });
      expect([what, ran]).toEqual([what, [gatedRun, false]]);
      expect(tab.warnings.filter((w) => /consent banner/.test(w))).toEqual(
        gatedRun
          ? [
              expect.stringContaining(
                'a script gated on "necessary" was not run: it needs the page\'s nonce',
              ),
            ]
          : [
              expect.stringContaining(
                "gated scripts are not run: the loader runs without a tag of its own",
              ),
            ],
      );
    }
  });

  it("goes on without Consent Mode where the page's dataLayer is not an array", async () => {
    const { teamId, publicId } = await bannerPage(
      {},
      { head: `<script nonce="${NONCE}">window.dataLayer = "not a list";</script>` },
    );
    await expect.poll(() => dialog(tab.page).count()).toBe(1);
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.method).toBe("accept_necessary");
    expect(tab.warnings).toEqual([
      // The message, then the page's error (for its stack).
      expect.stringMatching(
        new RegExp(
          `^consent banner ${publicId}: the page's dataLayer refused Consent Mode's default `,
        ),
      ),
      expect.stringMatching(
        new RegExp(
          `^consent banner ${publicId}: the page's dataLayer refused Consent Mode's update `,
        ),
      ),
    ]);
  });

  it("takes an integrator's state in a frame on another site, where Chromium keeps no cookie yet says cookies are enabled", async () => {
    // The same server by another name: a top page of another site (127.0.0.1, not localhost).
    const { framed, frame } = await framedBannerPage({
      origin: ctx.site.origin.replace("localhost", "127.0.0.1"),
    });
    expect(await frame.evaluate(() => navigator.cookieEnabled)).toBe(true);
    expect(await applyState(frame, handedIn)).toBe(true);
    expect(await stateOf(frame)).toEqual(handedIn);
    await expect.poll(() => framed.count()).toBe(0);
    expect(tab.warnings).toContainEqual(
      expect.stringMatching(
        /keeps no cookies for this page, so the applied state holds for this page only/,
      ),
    );
    // No probe cookie is left behind on a page that keeps cookies.
    await bannerPage();
    await tab.page.waitForFunction(() => "consentBanner" in window);
    expect(await applyState(tab.page, handedIn)).toBe(true);
    expect(await tab.page.evaluate(() => document.cookie)).not.toContain("consent_probe");
  });

  it("speaks the page's language with English fallback, and warns of low contrast", async () => {
    const texts = {
      de: {
        title: "Ihre Privatsphäre",
        acceptAll: "Alle akzeptieren",
        privacyPolicyUrl: "https://shop.example.com/datenschutz",
        privacyPolicyLabel: "Datenschutzerklärung",
        alwaysOnLabel: "Immer aktiv",
      },
    };
    const { teamId } = await bannerPage({ texts, textColor: "#bbbbbb" }, { lang: "de-AT" });
    await expect
      .poll(() => dialog(tab.page).getByRole("heading").textContent())
      .toBe("Ihre Privatsphäre");
    expect(await dialog(tab.page).getByRole("button", { name: "Reject all" }).count()).toBe(1);
    expect(await dialog(tab.page).getByRole("link").textContent()).toBe("Datenschutzerklärung");
    // What the banner lacks in German is English and says so (WCAG 3.1.2); the German link
    // inside the English description says it is German.
    const langOf = (element: Locator) => element.getAttribute("lang");
    expect(await langOf(dialog(tab.page).getByRole("heading"))).toBeNull();
    expect(await langOf(dialog(tab.page).locator("#d"))).toBe("en");
    expect(await langOf(dialog(tab.page).getByRole("link"))).toBe("de");
    expect(await langOf(dialog(tab.page).getByRole("button", { name: "Reject all" }))).toBe("en");
    expect(
      await langOf(dialog(tab.page).getByRole("button", { name: "Alle akzeptieren" })),
    ).toBeNull();
    await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
    // The required category's locked box says why, in the page's language.
    expect(
      await dialog(tab.page).getByRole("checkbox", { name: "Necessary Immer aktiv" }).isDisabled(),
    ).toBe(true);
    await dialog(tab.page).getByRole("button", { name: "Alle akzeptieren" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.languageCode).toBe("de");
    expect(tab.warnings).toEqual([
      expect.stringMatching(/textColor on secondaryColor: contrast 1\.\d+:1 is below WCAG 2\.2 AA/),
    ]);
  });
  it("keeps an inline box in the page flow at any position, shown whatever the page's CSS says of divs", async () => {
    ctx.site.file("/hostile.css", "text/css", "div:empty{display:none}");
    const cases = [
      ["inline", "top"],
      ["inline", "center"],
      ["inline", "bottom"],
      ["modal", "center"],
    ] as const;
    for (const [layout, position] of cases) {
      // No slot in the page: the box goes first or last in <body>.
      await bannerPage(
        { layout, position },
        { head: '<link rel="stylesheet" href="/hostile.css">', body: "" },
      );
      await expect.poll(() => dialog(tab.page).isVisible()).toBe(true);
      const [panel, heading] = await Promise.all([
        dialog(tab.page).boundingBox(),
        tab.page.getByRole("heading", { name: "Shop" }).boundingBox(),
      ]);
      const [top, bottom] = [panel?.y ?? -1, (panel?.y ?? 0) + (panel?.height ?? 0)];
      expect([layout, position, top >= 0]).toEqual([layout, position, true]);
      if (layout === "modal") {
        expect(bottom).toBeLessThanOrEqual(tab.page.viewportSize()?.height ?? 0);
      } else if (position === "bottom") {
        // Last in <body>: below the page's content.
        expect(top).toBeGreaterThanOrEqual((heading?.y ?? 0) + (heading?.height ?? 0));
      } else {
        // First in <body>, above the page's heading, and wholly inside the document.
        expect(bottom).toBeLessThanOrEqual(heading?.y ?? 0);
      }
    }
  });

  it("gives focus back to where it was when the preferences close, in every layout", async () => {
    for (const layout of ["banner", "inline", "modal"] as const) {
      await bannerPage({ layout });
      await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
      const link = tab.page.locator('a[href="#top"]');
      const linkFocused = () =>
        tab.page.evaluate(
          () => document.activeElement === document.querySelector('a[href="#top"]'),
        );
      for (const closeBy of ["Escape", "Save"] as const) {
        await link.focus();
        await showPreferences(tab.page);
        await expect.poll(() => dialog(tab.page).count()).toBe(1);
        expect(
          await tab.page.evaluate(
            () => (document.activeElement?.shadowRoot?.activeElement as HTMLInputElement)?.name,
          ),
        ).toBe("analytics"); // the first switch that is not locked
        if (closeBy === "Escape") await tab.page.keyboard.press("Escape");
        else await dialog(tab.page).getByRole("button", { name: "Save choices" }).press("Enter");
        await expect.poll(() => dialog(tab.page).count()).toBe(0);
        expect([layout, closeBy, await linkFocused()]).toEqual([layout, closeBy, true]);
      }
    }
  });

  it("says its language and direction, and finds texts by the browser's languages and by region", async () => {
    const texts = {
      ar: { title: "خصوصيتك", acceptAll: "قبول الكل" },
      "pt-BR": { title: "Sua privacidade" },
      fr: { title: "Votre vie privée" },
    };
    const cases = [
      // No <html lang>: the browser's language, written right to left.
      { locale: "ar", pageLang: undefined, title: "خصوصيتك", lang: "ar", dir: "rtl" },
      // A page in Portuguese finds the texts of its Brazilian variant.
      { locale: "en-US", pageLang: "pt", title: "Sua privacidade", lang: "pt-BR", dir: "ltr" },
      // A German page without German texts: the visitor's French before English.
      { locale: "fr-FR", pageLang: "de", title: "Votre vie privée", lang: "fr", dir: "ltr" },
      // On a right-to-left page, English texts still read left to right.
      { locale: "en-US", pageLang: "he", title: "We value your privacy", lang: "en", dir: "ltr" },
    ];
    const fixture = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories, texts },
    });
    for (const { locale, pageLang, title, lang, dir } of cases) {
      const localized = await openPage(ctx.browser, { locale });
      await localized.page.goto(
        ctx.site.page(`/lang-${locale}-${pageLang}`, {
          publicId: fixture.publicId,
          ...(pageLang ? { lang: pageLang } : { noLang: true }),
        }),
      );
      await expect
        .poll(() => dialog(localized.page).getByRole("heading").textContent())
        .toBe(title);
      const root = localized.page.locator("[id^=consent-banner-] .r");
      expect([await root.getAttribute("lang"), await root.getAttribute("dir")]).toEqual([
        lang,
        dir,
      ]);
      await localized.context.close();
    }
  });

  it("fills what a regional variant's texts leave out from its language's, not from English", async () => {
    // An Austrian variant that says only its title otherwise; the rest is the German texts'.
    const texts = {
      de: {
        title: "Ihre Privatsphäre",
        description: "Wir verwenden Cookies.",
        acceptAll: "Alle akzeptieren",
        rejectAll: "Alle ablehnen",
        customize: "Anpassen",
        save: "Auswahl speichern",
        alwaysOnLabel: "Immer aktiv",
      },
      "de-AT": { title: "Ihre Privatsphäre in Österreich" },
    };
    const { teamId } = await bannerPage({ texts }, { lang: "de-AT" });
    await expect
      .poll(() => dialog(tab.page).getByRole("heading").textContent())
      .toBe("Ihre Privatsphäre in Österreich");
    expect(await dialog(tab.page).locator("#d").textContent()).toBe("Wir verwenden Cookies.");
    expect(await dialog(tab.page).getByRole("button").allTextContents()).toEqual([
      "Alle akzeptieren",
      "Alle ablehnen",
      "Anpassen",
    ]);
    // German throughout: nothing in it is marked as another language.
    expect(await dialog(tab.page).locator("[lang]").count()).toBe(0);
    expect(await tab.page.locator("[id^=consent-banner-] .r").getAttribute("lang")).toBe("de-AT");
    await dialog(tab.page).getByRole("button", { name: "Anpassen" }).click();
    await dialog(tab.page).getByRole("button", { name: "Auswahl speichern" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).toMatchObject({ method: "consent_given", languageCode: "de-AT" });
  });

  it("shows the operator's texts as text, from its tag and with its body inlined in the page's HTML", async () => {
    // Markup, a script end tag, a comment opener and line separators in the texts: shown as
    // written, whether the loader comes by its tag or a site places its body in an inline script.
    const title = `</script><p id="injected">You won</p><script nonce="${NONCE}">window.injectedRan = true</script>`;
    const acceptAll = "<!-- Accept\u2028all\u2029<b>now</b>";
    const { publicId, url } = await bannerSite({ texts: { en: { title, acceptAll } } });
    const body = (await http(ctx.service, "GET", `/loader/${publicId}.js`)).text;
    const inlined = ctx.site.page(`/inlined-${publicId}`, {
      publicId,
      noLoaderTag: true,
      head: `<script nonce="${NONCE}">${body}</script>`,
    });
    for (const address of [url, inlined]) {
      tab.warnings.length = 0;
      await tab.page.goto(address);
      await expect.poll(() => dialog(tab.page).count()).toBe(1);
      const shown = await dialog(tab.page).evaluate((panel) => [
        panel.querySelector("h2")?.textContent,
        panel.querySelector("button")?.textContent,
      ]);
      expect([address, shown]).toEqual([address, [title, acceptAll]]);
      const injected = await tab.page.evaluate(() => [
        document.getElementById("injected") !== null,
        (window as { injectedRan?: boolean }).injectedRan ?? false,
      ]);
      expect([address, injected]).toEqual([address, [false, false]]);
      // Run inline, without a fetch of its own, it cannot tell where to post choices, and says so.
      const other = tab.warnings.filter((w) => !/cannot tell where the loader came from/.test(w));
      expect([address, other]).toEqual([address, []]);
    }
  });

  it("wraps a long word in the operator's texts inside a narrow panel", async () => {
    await tab.page.setViewportSize({ width: 320, height: 640 });
    await bannerPage({
      texts: { en: { description: `See https://shop.example.com/${"privacy-".repeat(12)}policy` } },
    });
    const panel = dialog(tab.page);
    await expect.poll(() => panel.count()).toBe(1);
    expect(await panel.evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true);
    expect((await panel.boundingBox())?.width).toBeLessThanOrEqual(320);
  });
});
