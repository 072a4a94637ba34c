import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contrastShortfalls } from "#daemon/banners/colors.js";
import { shortfallMessage } from "#daemon/banners/contrast.js";
import {
  categoriesDrawn,
  mixedDirections,
  skipBrowserTests,
  useChromium,
  useTestPage,
} from "#test/support/browser.js";
import {
  aChoice,
  alteredLink,
  bannerFixture,
  labelledCategories,
  postLog,
  storedRows,
} from "#test/support/consent-log.js";
import { freePort } from "#test/support/processes.js";
import { startTestService, type TestService } from "#test/support/service.js";

const configuration = { categories: labelledCategories };

/**
 * Another website, on 127.0.0.1 and reached as http://localhost:<port> (another site than the
 * gateway's 127.0.0.1) or http://127.0.0.1:<port> (the same site, another origin), whose page
 * makes the browser post a form to a preferences link it learned, as soon as it loads.
 */
async function startOtherSite() {
  const pages = new Map<string, string>();
  const server: Server = createServer((request, response) => {
    const html = pages.get((request.url ?? "/").split("?")[0] ?? "/");
    if (!html) return response.writeHead(request.url === "/favicon.ico" ? 204 : 404).end();
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    /** Serves, at `path` on `host`, a page that submits `fields` to `link` and returns its address. */
    formPostingTo(host: string, path: string, link: string, fields: [string, string][]): string {
      const inputs = fields
        .map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`)
        .join("");
      pages.set(
        path,
        `<!doctype html><html lang="en"><head><title>Prize draw</title></head><body>
<form method="post" action="${link}">${inputs}</form>
<script>document.forms[0].submit()</script></body></html>`,
      );
      return `http://${host}:${port}${path}`;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** decisions §5 in real Chromium: a visitor changes their choice through the managePreferences link. */
describe.skipIf(skipBrowserTests)("preferences page in Chromium", () => {
  let service: TestService;
  let otherSite: Awaited<ReturnType<typeof startOtherSite>>;
  const chromium = useChromium();

  beforeAll(async () => {
    // The link the log route returns must open the gateway: CONSENT_BASE_URL names its address.
    const port = await freePort();
    service = await startTestService({
      gateway: true,
      env: { CONSENT_HTTP_PORT: String(port), CONSENT_BASE_URL: `http://127.0.0.1:${port}` },
    });
    otherSite = await startOtherSite();
  });
  afterAll(async () => {
    await otherSite?.close();
    await service?.close();
  });
  const tab = useTestPage(chromium);

  /** A banner, a choice logged on its site, and the managePreferences link the log route gave. */
  async function choiceWithLink(
    consentId: string,
    banner: Record<string, unknown> = { configuration },
    languageCode = "en",
  ) {
    const { teamId, publicId } = await bannerFixture(service, banner);
    const logged = await postLog(
      service,
      aChoice(publicId, {
        consentId,
        languageCode,
        preferences: { necessary: true, analytics: true, marketing: false },
      }),
    );
    expect(logged.status).toBe(200);
    const link: string = logged.body.managePreferences;
    expect(link.startsWith(`${service.gatewayUrl}/preferences/`)).toBe(true);
    return { teamId, link };
  }

  const checkbox = (name: RegExp) => tab.page.getByRole("checkbox", { name });

  // Regression: where the page does not ship the language of the banner's texts, the title after
  // a save stayed the banner's title alone: the tab, and a screen reader's first words, did not
  // say the choices were saved.
  it("titles the page after a save as saved, in English, where it does not ship the texts' language", async () => {
    const { link } = await choiceWithLink(
      "7b1d3c0f-4e5a-4f72-8b6c-9d0e1f2a3b4c",
      { configuration: { ...configuration, texts: { ja: { title: "プライバシー設定" } } } },
      "ja",
    );
    await tab.page.goto(link);
    expect(await tab.page.title()).toBe("プライバシー設定");
    await tab.page.getByRole("button", { name: "Save choices" }).click();
    await tab.page.waitForURL((url) => url.href.startsWith(`${link}?saved=`));
    expect(await tab.page.getByRole("status").textContent()).toBe("Your choices have been saved.");
    expect(await tab.page.title()).toBe("Your choices have been saved");
    expect(await tab.page.locator("title").getAttribute("lang")).toBe("en");
    expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
      "プライバシー設定",
    );
  });

  it("shows the last choice, and saves a change made with the keyboard as consent_changed", async () => {
    const consentId = "5a0c2b9e-3d4f-4e61-9a7b-8c9d0e1f2a3b";
    const { teamId, link } = await choiceWithLink(consentId);

    const opened = await tab.page.goto(link);
    expect(opened?.status()).toBe(200);
    expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
      "We value your privacy",
    );
    // The required category is shown ticked and locked, with its note; the others as last chosen.
    const necessary = checkbox(/Necessary/);
    expect([await necessary.isChecked(), await necessary.isDisabled()]).toEqual([true, true]);
    expect(await tab.page.getByText("Always on").isVisible()).toBe(true);
    expect(await checkbox(/Analytics/).isChecked()).toBe(true);
    expect(await checkbox(/Marketing/).isChecked()).toBe(false);
    // Each box is named by its label (and the locked note); a description describes it.
    const named = (name: string) => tab.page.getByRole("checkbox", { name, exact: true });
    expect(await named("Necessary Always on").count()).toBe(1);
    expect(
      await named("Analytics").evaluate(
        (box) => document.getElementById(box.getAttribute("aria-describedby") ?? "")?.textContent,
      ),
    ).toBe("Usage statistics");

    // Keyboard only: Tab skips the locked box; Space ticks Marketing.
    for (let i = 0; i < 5; i++) {
      await tab.page.keyboard.press("Tab");
      const focused = await tab.page.evaluate(
        () => (document.activeElement as HTMLInputElement).value,
      );
      if (focused === "marketing") break;
    }
    await tab.page.keyboard.press("Space");
    expect(await checkbox(/Marketing/).isChecked()).toBe(true);

    const posted = tab.page.waitForRequest((request) => request.method() === "POST");
    await tab.page.getByRole("button", { name: "Save choices" }).click();
    await tab.page.waitForURL((url) => url.href.startsWith(`${link}?saved=`));
    // The browser's own verdict on the page's form, which the gateway's check relies on.
    expect(await (await posted).headerValue("sec-fetch-site")).toBe("same-origin");

    const status = tab.page.getByRole("status");
    expect(await status.isVisible()).toBe(true);
    expect(await status.textContent()).toBe("Your choices have been saved.");
    // Focused on arrival, so a screen reader reads it out.
    expect(await tab.page.evaluate(() => document.activeElement?.getAttribute("role"))).toBe(
      "status",
    );
    expect(await checkbox(/Marketing/).isChecked()).toBe(true);
    expect(await checkbox(/Analytics/).isChecked()).toBe(true);

    const rows = await storedRows(service, teamId);
    expect(rows).toHaveLength(2);
    expect(tab.page.url()).toBe(`${link}?saved=${rows[0]?.id}`);
    expect(rows[0]).toMatchObject({
      method: "consent_changed",
      consentId,
      preferences: { necessary: true, analytics: true, marketing: true },
      languageCode: "en",
    });
    // Reloading the saved page records nothing more (303 then GET).
    await tab.page.reload();
    expect(await storedRows(service, teamId)).toHaveLength(2);
    expect(tab.warnings).toEqual([]);
  });

  // Regression: as on the banner, a category's own label and description took the page's
  // direction: on a Hebrew page an English description ended in a full stop drawn at its left.
  it("draws a category's own label and description in their own direction, whatever the page's", async () => {
    const banner = { configuration: mixedDirections.configuration };
    const drawn = [];
    for (const [languageCode, consentId] of [
      ["he", "0c5e7a1b-2d3f-4a6b-8c9d-1e2f3a4b5c6d"],
      ["en", "1d6f8b2c-3e4a-4b7c-9d0e-2f3a4b5c6d7e"],
    ] as const) {
      const { link } = await choiceWithLink(consentId, banner, languageCode);
      await tab.page.goto(link);
      drawn.push(await categoriesDrawn(tab.page.locator("html"), tab.page));
    }
    expect(drawn).toEqual(mixedDirections.drawn);
  });

  /** Each checkbox's and button's box, in CSS px. */
  const targetSizes = () =>
    tab.page.$$eval("input, button", (targets) =>
      targets.map((target) => {
        const { width, height } = target.getBoundingClientRect();
        return { target: target.outerHTML.slice(0, 60), width, height };
      }),
    );

  it("gives every checkbox and button a target of at least 24 × 24 CSS px (WCAG 2.2 2.5.8)", async () => {
    const { link } = await choiceWithLink("8d3f5ec1-6072-4194-8dae-bfc012c3d4e5");
    await tab.page.goto(link);
    const sizes = await targetSizes();
    expect(sizes).toHaveLength(4);
    for (const size of sizes) {
      expect(size.width, size.target).toBeGreaterThanOrEqual(24);
      expect(size.height, size.target).toBeGreaterThanOrEqual(24);
    }
  });

  /**
   * The colours Chromium computes for what the visitor sees: the page's background and text, the
   * Save button, and the focus ring on the first checkbox reached with Tab.
   */
  async function shownColors() {
    await tab.page.keyboard.press("Tab");
    return tab.page.evaluate(() => {
      const style = (element: Element | null) => getComputedStyle(element ?? document.body);
      const button = style(document.querySelector("button"));
      return {
        background: style(document.body).backgroundColor,
        text: style(document.body).color,
        button: button.backgroundColor,
        buttonText: button.color,
        focusRing: style(document.activeElement).outlineColor,
      };
    });
  }

  // decisions §3 colours: every pair the page shows meets WCAG 2.2 AA, whatever was configured.
  it("draws the banner's colours where they meet AA, the defaults of a failing pair, else all defaults", async () => {
    const cases = [
      {
        consentId: "1f5a7b3c-2d4e-4f60-8a1b-2c3d4e5f6a7b",
        configured: {
          primaryColor: "rgb(18 52 86)",
          secondaryColor: "ivory",
          textColor: "hsl(0 0% 13%)",
          accentColor: "#0b5394",
        },
        shown: {
          background: "rgb(255, 255, 240)",
          text: "rgb(33, 33, 33)",
          button: "rgb(18, 52, 86)",
          buttonText: "rgb(255, 255, 240)",
          focusRing: "rgb(11, 83, 148)",
        },
      },
      {
        // White labels on pale yellow buttons (1.36:1): the buttons' two roles take the defaults.
        consentId: "2a6b8c4d-3e5f-4a71-9b2c-3d4e5f6a7b8c",
        configured: {
          primaryColor: "#f5d76e",
          secondaryColor: "#fffbe6",
          textColor: "#1a1a1a",
          accentColor: "#0b5394",
        },
        shown: {
          background: "rgb(255, 255, 255)",
          text: "rgb(26, 26, 26)",
          button: "rgb(0, 0, 0)",
          buttonText: "rgb(255, 255, 255)",
          focusRing: "rgb(11, 83, 148)",
        },
      },
      {
        // Black buttons on black: mending them puts the white text on white, so all defaults.
        consentId: "3b7c9d5e-4f60-4b82-8c3d-4e5f6a7b8c9d",
        configured: {
          primaryColor: "#000000",
          secondaryColor: "#000000",
          textColor: "#ffffff",
          accentColor: "#ffffff",
        },
        shown: {
          background: "rgb(255, 255, 255)",
          text: "rgb(51, 51, 51)",
          button: "rgb(0, 0, 0)",
          buttonText: "rgb(255, 255, 255)",
          focusRing: "rgb(0, 123, 255)",
        },
      },
    ];
    for (const { consentId, configured, shown } of cases) {
      const { link } = await choiceWithLink(consentId, {
        configuration: { ...configuration, ...configured },
      });
      await tab.page.goto(link);
      expect(await shownColors(), JSON.stringify(configured)).toEqual(shown);
    }
  });

  // prefers-color-scheme: the page's own colours have a dark scheme (CSS only); a site's stay.
  it("follows the visitor's dark scheme in its own colours, meeting AA; a site's colours stay as they are", async () => {
    const dark = {
      background: "rgb(18, 18, 18)",
      text: "rgb(230, 230, 230)",
      button: "rgb(242, 242, 242)",
      buttonText: "rgb(18, 18, 18)",
      focusRing: "rgb(102, 178, 255)",
    };
    const { link } = await choiceWithLink("4c8d0e6f-5a71-4c93-9d4e-5f6a7b8c9d0e");
    await tab.page.emulateMedia({ colorScheme: "dark" });
    await tab.page.goto(link);
    const shown = await shownColors();
    expect(shown).toEqual(dark);
    // What Chromium shows meets AA by the project's own contrast check, as the banner's must.
    const roles = {
      primary: shown.button,
      secondary: shown.background,
      text: shown.text,
      accent: shown.focusRing,
    };
    expect(contrastShortfalls(roles, false).map(shortfallMessage)).toEqual([]);
    // The checkboxes' boxes are drawn dark too.
    expect(
      await tab.page.evaluate(() => getComputedStyle(document.documentElement).colorScheme),
    ).toBe("light dark");

    // A failure page (an altered link) too.
    await tab.page.goto(alteredLink(link));
    expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
      "This link is not valid",
    );
    const body = await tab.page.evaluate(() => {
      const style = getComputedStyle(document.body);
      return [style.backgroundColor, style.color];
    });
    expect(body).toEqual([dark.background, dark.text]);

    // The light scheme keeps the defaults.
    await tab.page.emulateMedia({ colorScheme: "light" });
    await tab.page.goto(link);
    expect(await shownColors()).toEqual({
      background: "rgb(255, 255, 255)",
      text: "rgb(51, 51, 51)",
      button: "rgb(0, 0, 0)",
      buttonText: "rgb(255, 255, 255)",
      focusRing: "rgb(0, 123, 255)",
    });

    // A site's own colours are its look, in either scheme, as on its banner.
    const { link: branded } = await choiceWithLink("5d9e1f70-6b82-4da4-8e5f-6a7b8c9d0e1f", {
      configuration: {
        ...configuration,
        primaryColor: "rgb(18 52 86)",
        secondaryColor: "ivory",
        textColor: "hsl(0 0% 13%)",
        accentColor: "#0b5394",
      },
    });
    await tab.page.emulateMedia({ colorScheme: "dark" });
    await tab.page.goto(branded);
    expect(await shownColors()).toEqual({
      background: "rgb(255, 255, 240)",
      text: "rgb(33, 33, 33)",
      button: "rgb(18, 52, 86)",
      buttonText: "rgb(255, 255, 240)",
      focusRing: "rgb(11, 83, 148)",
    });
    expect(tab.warnings.filter((warning) => !warning.includes("403"))).toEqual([]);
  });

  /** Whether the page scrolls sideways, and the elements reaching past the window's right edge. */
  const overflow = () =>
    tab.page.evaluate(() => ({
      scrollsSideways: document.documentElement.scrollWidth > document.documentElement.clientWidth,
      pastTheEdge: Array.from(document.querySelectorAll("body *"))
        .filter((element) => element.getBoundingClientRect().right > window.innerWidth)
        .map((element) => element.tagName),
    }));

  it("reflows at 320 CSS px, 400 % zoom, with long words and the text spacing of WCAG 1.4.12", async () => {
    const long = "Einwilligungsverwaltungseinstellungen";
    const banner = {
      configuration: {
        categories: [
          { name: "necessary", required: true, label: "Unbedingterforderlichecookies" },
          { name: "analytics", label: "Reichweitenmessungsdienstleister", description: long },
        ],
        texts: { de: { title: "Datenschutzeinstellungen", customize: long, save: long } },
      },
    };
    const { link } = await choiceWithLink("9e4a6fd2-7183-42a5-9ebf-c0d123d4e5f6", banner, "de");
    // 1280 × 1024 at 400 % zoom.
    await tab.page.setViewportSize({ width: 320, height: 256 });
    await tab.page.goto(link);
    expect(await overflow()).toEqual({ scrollsSideways: false, pastTheEdge: [] });
    // A user style sheet's text spacing (1.4.12), set through CSSOM as a bookmarklet would.
    await tab.page.evaluate(() => {
      for (const element of Array.from(document.querySelectorAll<HTMLElement>("body, body *"))) {
        element.style.setProperty("line-height", "1.5", "important");
        element.style.setProperty("letter-spacing", "0.12em", "important");
        element.style.setProperty("word-spacing", "0.16em", "important");
      }
      for (const paragraph of Array.from(document.querySelectorAll<HTMLElement>("p"))) {
        paragraph.style.setProperty("margin-bottom", "2em", "important");
      }
    });
    expect(await overflow()).toEqual({ scrollsSideways: false, pastTheEdge: [] });
    expect(await tab.page.getByRole("button", { name: long }).isVisible()).toBe(true);
  });

  // The gateway is http://127.0.0.1:<port>: localhost is another site, 127.0.0.1 on another port
  // the same site but another origin. Both are refused (decisions §5: the page is the service's own).
  const otherOrigins = [
    ["another site", "localhost", "cross-site", "6b1d3caf-4e50-4f72-8b8c-9daef0a1b2c3"],
    [
      "the same site on another port",
      "127.0.0.1",
      "same-site",
      "7c2e4db0-5f61-4083-9c9d-aebf01b2c3d4",
    ],
  ] as const;
  for (const [name, host, fetchSite, consentId] of otherOrigins) {
    it(`refuses a form ${name} makes the browser post to the link, and records nothing`, async () => {
      const { teamId, link } = await choiceWithLink(consentId);
      const fields: [string, string][] = [
        ["category", "analytics"],
        ["category", "marketing"],
      ];
      const attack = otherSite.formPostingTo(host, `/draw-${host}`, link, fields);

      const refused = tab.page.waitForResponse(
        (response) => response.url() === link && response.request().method() === "POST",
      );
      await tab.page.goto(attack, { waitUntil: "commit" });
      const response = await refused;
      expect(await response.request().headerValue("sec-fetch-site")).toBe(fetchSite);
      expect(response.status()).toBe(403);
      await tab.page.waitForURL(link);
      expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
        "Your choices were not saved",
      );
      const rows = await storedRows(service, teamId);
      expect(rows.map((row) => row.method)).toEqual(["consent_given"]);
      // One step back to the visitor's own settings page, which records nothing by itself.
      await tab.page.getByRole("link", { name: "Open your privacy settings" }).click();
      await tab.page.waitForURL(link);
      expect(await tab.page.getByRole("button", { name: "Save choices" }).isVisible()).toBe(true);
      expect(await storedRows(service, teamId)).toHaveLength(1);

      // The same fields sent by a client that is no browser are a valid form: the refusal above
      // came from the origin check, not from the fields.
      const control = await fetch(link, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(fields).toString(),
        redirect: "manual",
      });
      expect(control.status).toBe(303);
      expect((await storedRows(service, teamId))[0]).toMatchObject({
        method: "consent_changed",
        consentId,
        preferences: { necessary: true, analytics: true, marketing: true },
      });
    });
  }
});
