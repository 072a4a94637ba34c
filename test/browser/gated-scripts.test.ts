import { createHash } from "node:crypto";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  clearState,
  dialog,
  NONCE,
  type SitePage,
  showPreferences,
  skipBrowserTests,
  useBrowserSite,
  useTestPage,
} from "#test/support/browser.js";
import { bannerFixture } from "#test/support/consent-log.js";

/** Category names are unique ignoring case: a page may write them in another case. */
const categories = [
  { name: "necessary", required: true },
  { name: "analytics" },
  { name: "Marketing" },
];
/** The page's own first script: gated scripts report to `window.order` as they run. */
const start = `<script nonce="${NONCE}">window.order = [];</script>`;
/** A gated inline script of `category` with the page's nonce. */
const gated = (category: string, text: string, attributes = "") =>
  `<script type="text/plain" data-category="${category}" nonce="${NONCE}"${attributes}>${text}</script>`;
/** A gated script of `category` whose text reports `name`, with the page's nonce. */
const inline = (category: string, name: string, attributes = "") =>
  gated(category, `window.order.push(${JSON.stringify(name)});`, attributes);
/** A gated inline module of `category`. */
const inlineModule = (category: string, text: string) =>
  gated(category, text, ' data-type="module"');
/** Gated script text that reports `name`, and whether the module's global was set by then. */
const reportsLib = (name: string) =>
  `window.order.push(${JSON.stringify(name)} + (window.lib ? "" : " before the module"));`;

/** `<script type="text/plain" data-category="…">` activation (docs/banner-runtime.md). */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: gated scripts", () => {
  const ctx = useBrowserSite();
  const tab = useTestPage(() => ctx.browser);

  /** Serves each file as JavaScript from the site's origin. */
  const files = (scripts: Record<string, string>) => {
    for (const [path, body] of Object.entries(scripts))
      ctx.site.file(path, "text/javascript", body);
  };
  /**
   * Opens a page of a fresh banner's site with `body` after the loader; `scriptSrc` is the page's
   * script-src in place of its nonce-only one.
   */
  async function visit(
    body: string,
    {
      scriptSrc,
      ...options
    }: Omit<SitePage, "publicId" | "body"> & {
      scriptSrc?: string;
    } = {},
  ) {
    const { publicId } = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories },
    });
    const url = ctx.site.page(`/gated-${publicId}`, { publicId, body, ...options });
    if (scriptSrc) {
      // Chromium counts a page fulfilled here as public (Local Network Access): the loader on
      // the loopback gateway then comes the same way.
      await tab.context.route("**/loader/**", async (route) =>
        route.fulfill({ response: await route.fetch() }),
      );
      await tab.context.route(url, async (route) => {
        const response = await route.fetch();
        const csp = response.headers()["content-security-policy"] ?? "";
        expect(csp).toContain(`script-src 'nonce-${NONCE}';`);
        await route.fulfill({
          response,
          headers: {
            ...response.headers(),
            "content-security-policy": csp.replace(`'nonce-${NONCE}'`, scriptSrc),
          },
        });
      });
    }
    await tab.page.goto(url, { waitUntil: "domcontentloaded" }); // the load event waits for scripts
    await tab.page.waitForFunction(() => "consentBanner" in window);
    return publicId;
  }
  const acceptAll = () => dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
  const order = () =>
    tab.page.evaluate(() => (window as unknown as { order?: string[] }).order ?? null);
  /**
   * Stops the page's clock (Playwright's page clock) before the page loads: the runtime's timers
   * then go off only as the test moves that clock on (expectWaitedFor5s).
   */
  async function stopClock() {
    await tab.page.clock.install();
    await tab.page.clock.pauseAt(Date.now() + 1_000);
  }
  /**
   * With the page's clock stopped (stopClock) since before the page loaded: nothing runs until
   * 5 s have gone by on it (a stalled gated script is waited for, as the parser would), then
   * `ranAfter5s` runs.
   */
  async function expectWaitedFor5s(ranAfter5s: string[]) {
    await tab.page.clock.runFor(4_999);
    // A script the runtime let through runs as it is inserted; an external one once it loads.
    await tab.page.waitForTimeout(300);
    expect(await order()).toEqual([]);
    await tab.page.clock.runFor(1);
    await expect.poll(order).toEqual(ranAfter5s);
  }

  it("runs only gated scripts carrying the page's nonce, and warns of each other one", async () => {
    files({ "/evil.js": "window.order.push('injected external');" });
    const requested: string[] = [];
    tab.page.on("request", (request) => requested.push(new URL(request.url()).pathname));
    // Markup injected into the page (an HTML-injection bug) cannot know the page's nonce.
    const injected = [
      `<script type="text/plain" data-category="necessary">window.order.push('injected');</script>`,
      `<script type="text/plain" data-category="analytics" src="/evil.js"></script>`,
      `<script type="text/plain" data-category="necessary" nonce="guessed">window.order.push('guessed');</script>`,
    ].join("");
    const body = start + inline("necessary", "page's necessary") + injected;
    const ownWarnings = () => tab.warnings.filter((text) => text.startsWith("consent banner "));
    for (const scriptSrc of [undefined, `'nonce-${NONCE}' 'strict-dynamic'`]) {
      tab.warnings.length = 0;
      const publicId = await visit(body + inline("analytics", "page's analytics"), { scriptSrc });
      await expect.poll(order).toEqual(["page's necessary"]);
      await acceptAll();
      await expect.poll(order).toEqual(["page's necessary", "page's analytics"]);
      // One warning per script left out, however many choices follow.
      await showPreferences(tab.page);
      await acceptAll();
      // Console lines reach the test after the page wrote them: a last one of the test's own
      // makes sure none of the banner's is still on its way.
      await tab.page.evaluate(() => console.warn("sentinel"));
      await expect.poll(() => tab.warnings.at(-1)).toBe("sentinel");
      expect(ownWarnings()).toEqual([
        `consent banner ${publicId}: a script gated on "necessary" was not run: it needs the page's nonce`,
        `consent banner ${publicId}: a script gated on "analytics" was not run: it needs the page's nonce`,
        `consent banner ${publicId}: a script gated on "necessary" was not run: it needs the page's nonce`,
      ]);
      expect(await order()).toEqual(["page's necessary", "page's analytics"]);
    }
    expect(requested).not.toContain("/evil.js");
  });

  it("runs gated scripts the page adds with innerHTML, keeping their integrity, under Trusted Types", async () => {
    const lib = "window.order.push('lib'); window.Lib = {};";
    const sha256 = (text: string) => `sha256-${createHash("sha256").update(text).digest("base64")}`;
    files({
      "/lib.js": lib,
      "/tampered.js": "window.order.push('tampered');",
      "/legacy.js": "window.order.push('legacy');",
    });
    await visit(start, { csp: "require-trusted-types-for 'script'" });
    const markup = [
      inline("analytics", "before lib"),
      `<script type="text/plain" data-category="analytics" src="/lib.js" nonce="${NONCE}" integrity="${sha256(lib)}" crossorigin="anonymous"></script>`,
      inline("analytics", "after lib"),
      // Its integrity does not match what the server sends: the browser refuses it.
      `<script type="text/plain" data-category="analytics" src="/tampered.js" nonce="${NONCE}" integrity="${sha256("other")}"></script>`,
      `<script type="text/plain" data-category="necessary" src="/lib.js" nonce="${NONCE}" id="kept" class="tag" data-vendor="x"></script>`,
      // For browsers without modules: never loads, and is not waited for.
      `<script type="text/plain" data-category="analytics" src="/legacy.js" nomodule nonce="${NONCE}"></script>`,
      inline("analytics", "last"),
      inlineModule("analytics", "window.order.push('module');"),
    ].join("");
    // The page's own code (a single-page app) puts the markup in through a policy of its own.
    await tab.page.evaluate((html) => {
      const policy = (
        window as unknown as {
          trustedTypes: { createPolicy(n: string, p: object): { createHTML(h: string): string } };
        }
      ).trustedTypes.createPolicy("page", { createHTML: (h: string) => h });
      document.body.insertAdjacentHTML("beforeend", policy.createHTML(html));
    }, markup);
    await expect.poll(order).toEqual(["lib"]);
    await acceptAll();
    await expect.poll(order).toEqual(["lib", "before lib", "lib", "after lib", "last", "module"]);
    // The live copy keeps the page's other attributes.
    expect(
      await tab.page.evaluate(() => {
        const live = document.getElementById("kept") as HTMLScriptElement;
        return [live.type, live.className, live.dataset.vendor, live.nonce];
      }),
    ).toEqual(["text/javascript", "tag", "x", NONCE]);
    expect(tab.warnings.join("\n")).toContain("integrity");
    expect(tab.warnings.join("\n")).not.toContain("could not be activated");
  });

  it("still runs external gated scripts where Trusted Types refuse the banner's policy", async () => {
    files({ "/external.js": "window.order.push('external');" });
    await visit(
      start +
        inline("analytics", "inline") +
        `<script type="text/plain" data-category="analytics" src="/external.js" nonce="${NONCE}"></script>` +
        inlineModule("analytics", "window.order.push('module');"),
      { csp: "require-trusted-types-for 'script'; trusted-types page" },
    );
    await acceptAll();
    await expect.poll(order).toEqual(["external"]);
    expect(tab.warnings.join("\n")).toContain("TrustedScript");
    expect(tab.warnings.join("\n")).not.toContain("could not be activated");
  });

  it("moves on after 5 s from an external gated script that neither loads nor fails", async () => {
    await tab.context.route("**/stalled.js", () => {}); // never answered
    files({ "/next.js": "window.order.push('next external');" });
    await stopClock();
    const publicId = await visit(
      start +
        `<script type="text/plain" data-category="necessary" src="/stalled.js" nonce="${NONCE}"></script>` +
        inline("necessary", "after stalled") +
        `<script type="text/plain" data-category="necessary" src="/next.js" nonce="${NONCE}"></script>`,
    );
    await expectWaitedFor5s(["after stalled", "next external"]);
    expect(tab.warnings).toContainEqual(
      expect.stringMatching(new RegExp(`^consent banner ${publicId}: .*/stalled\\.js.* 5 s`)),
    );
  });

  /**
   * Answers `path` only once the returned function is called: a module's import the test holds
   * back, so the module runs when the test says.
   */
  async function heldBack(path: string, body: string) {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    await tab.context.route(`**${path}`, async (route) => {
      await released;
      await route.fulfill({ contentType: "text/javascript", body });
    });
    return release;
  }

  it("runs the gated scripts after an inline module once it has run, this choice's and the next's", async () => {
    files({ "/after.js": reportsLib("external defer") });
    // A nonce-based CSP, and one by host that refuses data: URLs (waitForModule's marker).
    const hostBased = `'self' 'unsafe-inline' ${ctx.service.gatewayUrl}`;
    for (const [i, scriptSrc] of [undefined, hostBased].entries()) {
      const release = await heldBack(`/lib-${i}.mjs`, "export const lib = {};");
      await visit(
        start +
          inlineModule(
            "necessary",
            `import { lib } from "/lib-${i}.mjs"; window.lib = lib; window.order.push("inline module");`,
          ) +
          `<script type="text/plain" data-category="necessary" src="/after.js" defer nonce="${NONCE}"></script>` +
          inlineModule("necessary", reportsLib("next inline module")) +
          gated("analytics", reportsLib("inline classic")),
        { scriptSrc },
      );
      // The next choice's scripts wait their turn behind the module's too.
      await acceptAll();
      expect(await order()).toEqual([]);
      release();
      await expect
        .poll(order)
        .toEqual(["inline module", "external defer", "next inline module", "inline classic"]);
    }
    expect(tab.warnings).toContainEqual(
      expect.stringContaining("'data:text/javascript,' violates"),
    );
  });

  it("moves on after 5 s from an inline module gated script whose import never arrives", async () => {
    await tab.context.route("**/stalled.mjs", () => {}); // never answered
    await stopClock();
    const publicId = await visit(
      start +
        inlineModule("necessary", `import "/stalled.mjs"; window.order.push("stalled module");`) +
        inlineModule("necessary", `window.order.push("module after stalled");`) +
        inlineModule("necessary", `window.order.push("third module");`) +
        inline("analytics", "classic after stalled"),
    );
    await expectWaitedFor5s(["module after stalled", "third module"]);
    // Nor is a later choice's script held up behind the stalled one.
    await acceptAll();
    await expect
      .poll(order)
      .toEqual(["module after stalled", "third module", "classic after stalled"]);
    expect(tab.warnings).toContainEqual(
      `consent banner ${publicId}: an inline module gated on "necessary" neither ran nor failed within 5 s: the gated scripts after it go ahead`,
    );
  });

  it("matches data-category to the banner's categories ignoring case", async () => {
    await visit(start + inline("marketing", "marketing") + inline("MARKETING, Necessary", "both"));
    expect(await order()).toEqual([]);
    await acceptAll();
    await expect.poll(order).toEqual(["marketing", "both"]);
  });

  it("warns once of each category name a gated script gives that the banner does not have", async () => {
    const body =
      start +
      inline("analytic", "typo") +
      inline("ANALYTIC", "typo again") +
      inline("analytics tracking", "one unknown") +
      inline("Marketing", "marketing");
    const publicId = await visit(body);
    await acceptAll();
    await expect.poll(order).toEqual(["marketing"]);
    // A single-page app adds one later, with a new typo and an old one.
    await tab.page.evaluate(
      (html) => document.body.insertAdjacentHTML("beforeend", html),
      inline("necesary", "later") + inline("analytic", "later again"),
    );
    await showPreferences(tab.page);
    await acceptAll();
    // Console lines reach the test after the page wrote them (see above).
    await tab.page.evaluate(() => console.warn("sentinel"));
    await expect.poll(() => tab.warnings.at(-1)).toBe("sentinel");
    const named = (name: string) =>
      `consent banner ${publicId}: scripts gated on "${name}" never run: the banner has no category "${name}" (its categories: necessary, analytics, Marketing)`;
    expect(tab.warnings).toEqual([
      named("analytic"),
      named("tracking"),
      named("necesary"),
      "sentinel",
    ]);
    expect(await order()).toEqual(["marketing"]);
  });

  it("runs gated scripts in the parser's order: classic ones first, then deferred and module ones", async () => {
    files({
      "/deferred.js": "window.order.push('external defer');",
      "/module.js": "window.order.push('external module');",
      "/classic.js": "window.order.push('external classic');",
    });
    await visit(
      start +
        `<script type="text/plain" data-category="analytics" src="/deferred.js" defer nonce="${NONCE}"></script>` +
        inline("analytics", "inline 1") +
        inline("analytics", "inline module", ' data-type="module"') +
        `<script type="text/plain" data-category="analytics" data-type="module" src="/module.js" nonce="${NONCE}"></script>` +
        inline("analytics", "inline 2") +
        `<script type="text/plain" data-category="analytics" src="/classic.js" nonce="${NONCE}"></script>` +
        inline("analytics", "inline 3", " defer"),
    );
    await acceptAll();
    await expect
      .poll(order)
      .toEqual([
        "inline 1",
        "inline 2",
        "external classic",
        "inline 3",
        "external defer",
        "inline module",
        "external module",
      ]);
  });

  it("runs only the required gated scripts the page adds after an erasure, here or in another tab", async () => {
    await visit(start);
    await acceptAll();
    const other = await tab.context.newPage();
    await other.goto(tab.page.url());
    await other.waitForFunction(() => "consentBanner" in window);
    /** Gated scripts a single-page app adds to `page` later, reporting to that page's order. */
    const addLater = (page: Page, name: string) =>
      page.evaluate(
        (html) => document.body.insertAdjacentHTML("beforeend", html),
        inline("analytics", `analytics ${name}`) + inline("necessary", `necessary ${name}`),
      );
    const orderOf = (page: Page) =>
      page.evaluate(() => (window as unknown as { order: string[] }).order);
    await addLater(tab.page, "while accepted");
    await expect.poll(order).toEqual(["analytics while accepted", "necessary while accepted"]);
    // The integrator erased the subject: the device's state is gone, and with it the consent.
    await clearState(tab.page);
    await addLater(tab.page, "after the erasure");
    await expect
      .poll(order)
      .toEqual([
        "analytics while accepted",
        "necessary while accepted",
        "necessary after the erasure",
      ]);
    // The other tab takes the erasure when shown again.
    await other.evaluate(() => dispatchEvent(new Event("focus")));
    await addLater(other, "after the erasure");
    await expect.poll(() => orderOf(other)).toEqual(["necessary after the erasure"]);
    // Nothing was still on its way.
    await tab.page.waitForTimeout(200);
    expect(await order()).toHaveLength(3);
    expect(await orderOf(other)).toHaveLength(1);
  });
});
