import { existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type Browser,
  type BrowserContextOptions,
  type Cookie,
  chromium,
  type Frame,
  type Locator,
  type Page,
} from "playwright-core";
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";
import type { Clock } from "#daemon/clock.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { SHARED_CHROMIUM } from "#test/support/chromium-environment.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** Debian's Chromium (apt-get install -y chromium); never a downloaded browser. */
export const CHROMIUM = "/usr/bin/chromium";

/**
 * Browser tests run wherever Chromium is installed; CI (CONSENT_REQUIRE_BROWSER, set by .ci/run,
 * which installs it) never skips them; elsewhere they are skipped with a notice.
 */
export const skipBrowserTests =
  !existsSync(CHROMIUM) && !process.env.CONSENT_REQUIRE_BROWSER && !process.env.CI;
if (skipBrowserTests) console.warn(`browser tests skipped: ${CHROMIUM} is not installed`);

/**
 * One headless Chromium per test file. Playwright turns the back/forward cache off by default;
 * `backForwardCache` leaves it on, as a visitor's browser has it. `args` adds switches (a
 * `--host-resolver-rules` that maps test host names to the loopback address).
 */
export function launchChromium({
  backForwardCache = false,
  args = [] as string[],
} = {}): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    ...(backForwardCache && { ignoreDefaultArgs: ["--disable-back-forward-cache"] }),
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      ...args,
    ],
  });
}

/**
 * The Chromium of this test process with the default arguments, launched by the first file that
 * asks for it and kept for the files after it, which vitest runs in the same process (isolate:
 * false): a launch is some 2 s of CPU. Files share nothing else of it: each test opens a browser
 * context of its own (openPage), and a file's contexts left open are closed after it
 * (useChromium). Kept on the global object, where the test environment closes it as vitest stops
 * the process (chromium-environment.ts).
 */
const shared = globalThis as { [SHARED_CHROMIUM]?: Promise<Browser> };

/**
 * For the enclosing describe: the process's shared Chromium (launched if need be) before its
 * tests, the browser contexts they left open closed after them.
 */
export function useChromium(): () => Browser {
  let browser: Browser | undefined;
  beforeAll(async () => {
    shared[SHARED_CHROMIUM] ??= launchChromium().then((launched) => {
      launched.on("disconnected", () => {
        delete shared[SHARED_CHROMIUM];
      });
      return launched;
    });
    browser = await shared[SHARED_CHROMIUM];
  });
  afterAll(async () => {
    await Promise.all((browser?.contexts() ?? []).map((context) => context.close()));
  });
  return () => {
    if (!browser) throw new Error("no Chromium: useChromium's beforeAll has not run");
    return browser;
  };
}

/** The nonce every test page puts on its scripts and in its CSP. */
export const NONCE = "dGVzdC1ub25jZQ";

export interface SitePage {
  publicId: string;
  /** Markup placed in <body> after the loader. */
  body?: string;
  /** Markup placed in <head> before the loader. */
  head?: string;
  lang?: string;
  /** Attributes added to the loader's tag, e.g. `defer`. */
  loaderAttributes?: string;
  /** Directives added to the page's CSP, e.g. `require-trusted-types-for 'script'`. */
  csp?: string;
  /** Sources the page's connect-src allows besides the gateway (an address in front of it). */
  connectSrc?: string;
  /** `<html>` without a lang attribute (the browser's languages then choose the texts). */
  noLang?: boolean;
  /** No loader tag: the page's own `head` brings the loader in (a tag manager's way). */
  noLoaderTag?: boolean;
}

/**
 * A website on its own origin (http://localhost:<port>) embedding the loader from the gateway
 * (http://127.0.0.1:<port>), under a strict CSP: scripts only by nonce, no inline styles, and
 * connections only to the gateway. Each page load gets a fresh loader URL query, so the browser's
 * HTTP cache never hides a publish between two loads.
 */
export async function startSite(service: TestService) {
  let loads = 0;
  const pages = new Map<string, SitePage>();
  const files = new Map<string, { type: string; body: string }>();
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0] ?? "/";
    const file = files.get(path);
    if (file) return response.writeHead(200, { "content-type": file.type }).end(file.body);
    const page = pages.get(path);
    if (!page) return response.writeHead(request.url === "/favicon.ico" ? 204 : 404).end();
    loads++;
    const loader = `${service.gatewayUrl}/loader/${page.publicId}.js?load=${loads}`;
    response.writeHead(200, {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": `script-src 'nonce-${NONCE}'; style-src 'self'; connect-src ${service.gatewayUrl}${page.connectSrc ? ` ${page.connectSrc}` : ""}${page.csp ? `; ${page.csp}` : ""}`,
    });
    const lang = page.noLang ? "" : ` lang="${page.lang ?? "en"}"`;
    response.end(`<!doctype html><html${lang}><head><title>Shop</title>
${page.head ?? ""}${page.noLoaderTag ? "" : `<script src="${loader}" nonce="${NONCE}"${page.loaderAttributes ? ` ${page.loaderAttributes}` : ""}></script>`}</head>
<body><h1>Shop</h1><a href="#top">Top</a>${page.body ?? ""}</body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const origin = `http://localhost:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    /** Serves a page at `path` and returns its address. */
    page(path: string, page: SitePage): string {
      pages.set(path, page);
      return `${origin}${path}`;
    },
    /** Serves a file (a script, a stylesheet) at `path` from the site's origin. */
    file(path: string, type: string, body: string): void {
      files.set(path, { type, body });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Waits until the team has `count` rows (beacons are asynchronous) and returns them, oldest first. */
export async function waitForRows(
  service: TestService,
  teamId: string,
  count: number,
): Promise<ConsentLogRecord[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const rows = await service.store.consentLog.list({ teamId, limit: 100 });
    if (rows.length >= count || Date.now() > deadline) return rows.toReversed();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The banner's dialog inside its shadow root (Playwright's CSS selectors pierce open roots). */
export const dialog = (page: Page) => page.locator("[id^=consent-banner-] [role=dialog]");

/**
 * The side each of `texts` ends on as drawn, `"right"` or `"left"`: where a sentence's full stop
 * sits, which a right-to-left paragraph draws at the left of an English sentence.
 */
const endSides = (texts: Locator) =>
  texts.evaluateAll((elements) =>
    elements.map((element) => {
      const text = element.firstChild as Text;
      const range = document.createRange();
      const x = (at: number) => {
        range.setStart(text, at);
        range.setEnd(text, at + 1);
        return range.getBoundingClientRect().x;
      };
      return x(text.length - 1) > x(0) ? "right" : "left";
    }),
  );

/**
 * Categories whose own labels and descriptions (in no stated language) are English but for one
 * Hebrew description, in a banner with Hebrew texts; and, for a view of them in Hebrew and then
 * one in English, what categoriesDrawn finds when each is drawn in its own direction.
 */
export const mixedDirections = {
  configuration: {
    categories: [
      { name: "necessary", required: true, label: "Necessary", description: "Sign-in and basket." },
      { name: "analytics", label: "Ads, pixels, etc.", description: "מודעות מותאמות אישית." },
    ],
    texts: { he: { title: "הפרטיות שלך" } },
  },
  drawn: [
    ["rtl", ["right", "right"], ["right", "left"]],
    ["ltr", ["right", "right"], ["right", "left"]],
  ],
};

/**
 * How the categories in `view` are drawn: the `dir` of `directed` (the view's root), then the
 * side the labels end on, then the descriptions (endSides).
 */
export const categoriesDrawn = async (directed: Locator, view: Locator | Page) => [
  (await directed.getAttribute("dir")) ?? "ltr",
  await endSides(view.locator("label b")),
  await endSides(view.locator("label small")),
];

/** The integrator API of the page's banner (docs/banner-runtime.md). */
interface BannerApi {
  getState(): unknown;
  applyState(state: unknown): boolean;
  showPreferences(): void;
  clearState(): void;
}

/** `consentBanner.applyState(state)` in the page (or a frame of it). */
export const applyState = (page: Page | Frame, state: unknown) =>
  page.evaluate(
    (s) => (window as unknown as { consentBanner: BannerApi }).consentBanner.applyState(s),
    state,
  );

/** `consentBanner.showPreferences()` in the page. */
export const showPreferences = (page: Page | Frame) =>
  page.evaluate(() =>
    (window as unknown as { consentBanner: BannerApi }).consentBanner.showPreferences(),
  );

/** `consentBanner.clearState()` in the page. */
export const clearState = (page: Page | Frame) =>
  page.evaluate(() =>
    (window as unknown as { consentBanner: BannerApi }).consentBanner.clearState(),
  );

/** The consent state the runtime exposes. */
export const stateOf = (page: Page | Frame) =>
  page.evaluate(() => (window as unknown as { consentBanner: BannerApi }).consentBanner.getState());

/** A team, a key and a banner on localhost (any port) with `categories`, and more configuration. */
export function localBanner(
  service: TestService,
  categories: readonly object[],
  configuration: Record<string, unknown> = {},
) {
  return bannerFixture(service, {
    domain: "localhost",
    configuration: { categories, ...configuration },
  });
}

/**
 * For the enclosing describe: a service with the gateway (with `env`, and `clock` for the
 * daemon's time) and a website embedding its loader, both closed after the file's tests, and the
 * process's Chromium (useChromium).
 */
export function useBrowserSite(env: Record<string, string> = {}, clock?: Clock) {
  const context = {} as {
    service: TestService;
    site: Awaited<ReturnType<typeof startSite>>;
    browser: Browser;
  };
  const chromium = useChromium();
  beforeAll(async () => {
    context.service = await startTestService({ gateway: true, env, clock });
    context.site = await startSite(context.service);
    context.browser = chromium();
  });
  afterAll(async () => {
    await context.site?.close();
    await context.service?.close();
  });
  return context;
}

/**
 * A fresh browser context (with `options`: a locale, request headers) and page, with what the
 * page says in its console (warnings and errors) and its uncaught errors collected in `warnings`.
 */
export async function openPage(browser: Browser, options: BrowserContextOptions = {}) {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  const warnings: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "warning" || message.type() === "error") warnings.push(message.text());
  });
  page.on("pageerror", (error) => warnings.push(error.message));
  return { context, page, warnings };
}

/**
 * A visitor's fresh page (openPage): from `country`, as the trusted proxy's geo header
 * `CF-IPCountry` says (a site started with `CONSENT_GEO_HEADER: "CF-IPCountry"` and
 * `CONSENT_TRUST_PROXY: "loopback"`), with Global Privacy Control on if `gpc`, and `cookies`
 * (a browser's from an earlier visit).
 */
export async function openVisitor(
  browser: Browser,
  options: { country?: string; gpc?: boolean; cookies?: Cookie[] } = {},
) {
  const tab = await openPage(browser, {
    extraHTTPHeaders: options.country ? { "CF-IPCountry": options.country } : {},
  });
  if (options.gpc) {
    await tab.context.addInitScript(() =>
      Object.defineProperty(Navigator.prototype, "globalPrivacyControl", { get: () => true }),
    );
  }
  if (options.cookies) await tab.context.addCookies(options.cookies);
  return tab;
}

/**
 * For the enclosing describe: a fresh page (openPage) of `browser()` for each test, closed after
 * it. The returned object holds the running test's context, page and warnings.
 */
export function useTestPage(browser: () => Browser) {
  const tab = {} as Awaited<ReturnType<typeof openPage>>;
  beforeEach(async () => {
    Object.assign(tab, await openPage(browser()));
  });
  afterEach(() => tab.context.close());
  return tab;
}
