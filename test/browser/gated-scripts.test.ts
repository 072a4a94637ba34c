import { createHash } from "node:crypto";
import type { BrowserContext, Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  dialog,
  NONCE,
  openPage,
  type SitePage,
  showPreferences,
  skipBrowserTests,
  useBrowserSite,
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
/** A gated script of `category` whose text reports `name`, with the page's nonce. */
const inline = (category: string, name: string, attributes = "") =>
  `<script type="text/plain" data-category="${category}" nonce="${NONCE}"${attributes}>window.order.push(${JSON.stringify(name)});</script>`;

/** `<script type="text/plain" data-category="…">` activation (docs/banner-runtime.md). */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: gated scripts", () => {
  const ctx = useBrowserSite();
  let context: BrowserContext;
  let page: Page;
  let warnings: string[];
  beforeEach(async () => {
    ({ context, page, warnings } = await openPage(ctx.browser));
  });
  afterEach(() => context.close());

  /** Serves each file as JavaScript from the site's origin. */
  const files = (scripts: Record<string, string>) => {
    for (const [path, body] of Object.entries(scripts))
      ctx.site.file(path, "text/javascript", body);
  };
  /**
   * Opens a page of a fresh banner's site with `body` after the loader; `strictDynamic` adds
   * 'strict-dynamic' to the page's nonce-based script-src.
   */
  async function visit(
    body: string,
    {
      strictDynamic = false,
      ...options
    }: Omit<SitePage, "publicId" | "body"> & {
      strictDynamic?: boolean;
    } = {},
  ) {
    const { publicId } = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories },
    });
    const url = ctx.site.page(`/gated-${publicId}`, { publicId, body, ...options });
    if (strictDynamic) {
      // Chromium counts a page fulfilled here as public (Local Network Access): the loader on
      // the loopback gateway then comes the same way.
      await context.route("**/loader/**", async (route) =>
        route.fulfill({ response: await route.fetch() }),
      );
      await context.route(url, async (route) => {
        const response = await route.fetch();
        const csp = response.headers()["content-security-policy"] ?? "";
        expect(csp).toContain(`script-src 'nonce-${NONCE}';`);
        await route.fulfill({
          response,
          headers: {
            ...response.headers(),
            "content-security-policy": csp.replace(";", " 'strict-dynamic';"),
          },
        });
      });
    }
    await page.goto(url, { waitUntil: "domcontentloaded" }); // the load event waits for scripts
    await page.waitForFunction(() => "consentBanner" in window);
  }
  const acceptAll = () => dialog(page).getByRole("button", { name: "Accept all" }).click();
  const order = () =>
    page.evaluate(() => (window as unknown as { order?: string[] }).order ?? null);

  it("runs only gated scripts carrying the page's nonce, and warns of each other one", async () => {
    files({ "/evil.js": "window.order.push('injected external');" });
    const requested: string[] = [];
    page.on("request", (request) => requested.push(new URL(request.url()).pathname));
    // Markup injected into the page (an HTML-injection bug) cannot know the page's nonce.
    const injected = [
      `<script type="text/plain" data-category="necessary">window.order.push('injected');</script>`,
      `<script type="text/plain" data-category="analytics" src="/evil.js"></script>`,
      `<script type="text/plain" data-category="necessary" nonce="guessed">window.order.push('guessed');</script>`,
    ].join("");
    const body = start + inline("necessary", "page's necessary") + injected;
    const ownWarnings = () => warnings.filter((text) => text.startsWith("consent banner:"));
    for (const strictDynamic of [false, true]) {
      warnings.length = 0;
      await visit(body + inline("analytics", "page's analytics"), { strictDynamic });
      await expect.poll(order).toEqual(["page's necessary"]);
      await acceptAll();
      await expect.poll(order).toEqual(["page's necessary", "page's analytics"]);
      // One warning per script left out, however many choices follow.
      await showPreferences(page);
      await acceptAll();
      // Console lines reach the test after the page wrote them: a last one of the test's own
      // makes sure none of the banner's is still on its way.
      await page.evaluate(() => console.warn("sentinel"));
      await expect.poll(() => warnings.at(-1)).toBe("sentinel");
      expect(ownWarnings()).toEqual([
        `consent banner: a script gated on "necessary" was not run: it needs the page's nonce`,
        `consent banner: a script gated on "analytics" was not run: it needs the page's nonce`,
        `consent banner: a script gated on "necessary" was not run: it needs the page's nonce`,
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
    ].join("");
    // The page's own code (a single-page app) puts the markup in through a policy of its own.
    await page.evaluate((html) => {
      const policy = (
        window as unknown as {
          trustedTypes: { createPolicy(n: string, p: object): { createHTML(h: string): string } };
        }
      ).trustedTypes.createPolicy("page", { createHTML: (h: string) => h });
      document.body.insertAdjacentHTML("beforeend", policy.createHTML(html));
    }, markup);
    await expect.poll(order).toEqual(["lib"]);
    await acceptAll();
    await expect.poll(order).toEqual(["lib", "before lib", "lib", "after lib", "last"]);
    // The live copy keeps the page's other attributes.
    expect(
      await page.evaluate(() => {
        const live = document.getElementById("kept") as HTMLScriptElement;
        return [live.type, live.className, live.dataset.vendor, live.nonce];
      }),
    ).toEqual(["text/javascript", "tag", "x", NONCE]);
    expect(warnings.join("\n")).toContain("integrity");
  });

  it("still runs external gated scripts where Trusted Types refuse the banner's policy", async () => {
    files({ "/external.js": "window.order.push('external');" });
    await visit(
      start +
        inline("analytics", "inline") +
        `<script type="text/plain" data-category="analytics" src="/external.js" nonce="${NONCE}"></script>`,
      { csp: "require-trusted-types-for 'script'; trusted-types page" },
    );
    await acceptAll();
    await expect.poll(order).toEqual(["external"]);
    expect(warnings.join("\n")).toContain("TrustedScript");
  });

  it("moves on after 5 s from an external gated script that neither loads nor fails", async () => {
    await context.route("**/stalled.js", () => {}); // never answered
    files({ "/next.js": "window.order.push('next external');" });
    await visit(
      start +
        `<script type="text/plain" data-category="necessary" src="/stalled.js" nonce="${NONCE}"></script>` +
        inline("necessary", "after stalled") +
        `<script type="text/plain" data-category="necessary" src="/next.js" nonce="${NONCE}"></script>`,
    );
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await order()).toEqual([]); // waited for, as the parser would
    await expect.poll(order, { timeout: 10_000 }).toEqual(["after stalled", "next external"]);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(warnings).toContainEqual(expect.stringMatching(/consent banner: .*\/stalled\.js.* 5 s/));
  });

  it("matches data-category to the banner's categories ignoring case", async () => {
    await visit(start + inline("marketing", "marketing") + inline("MARKETING, Necessary", "both"));
    expect(await order()).toEqual([]);
    await acceptAll();
    await expect.poll(order).toEqual(["marketing", "both"]);
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
});
