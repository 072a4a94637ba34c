import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { PREFERENCES_LINK_TTL_MS } from "#daemon/consent-log/preference-links.js";
import {
  audit,
  auditBanner,
  openBanner,
  POLICY_TEXTS,
  report,
  WCAG_TAGS,
} from "#test/support/axe.js";
import { dialog, skipBrowserTests, useBrowserSite, useTestPage } from "#test/support/browser.js";
import { aChoice, bannerFixture, labelledCategories, postLog } from "#test/support/consent-log.js";

/**
 * WCAG 2.0/2.1/2.2 A and AA, and axe's best practices, which here judge what we own: the dialog's
 * name, heading order, and the preferences page's landmarks and heading.
 */
const TAGS = [...WCAG_TAGS, "best-practice"];

/** The categories audited, with the line naming their services under two of them. */
const CATEGORIES = labelledCategories.map((category, i) =>
  i === 0 ? category : { ...category, services: ["Matomo", "Google Ads", "Meta Pixel"] },
);

/** A brand palette that meets AA (the runtime warns of none), unlike the defaults in every role. */
const BRAND = {
  primaryColor: "#7a1f5c",
  secondaryColor: "#fff8e7",
  textColor: "#2b2b2b",
  accentColor: "#0b5fff",
};

/** Right-to-left texts, the policy link's label included. */
const HEBREW = {
  title: "אנחנו מכבדים את הפרטיות שלך",
  description: "אנחנו משתמשים בעוגיות כדי להפעיל את האתר ולמדוד את השימוש בו.",
  acceptAll: "לקבל הכול",
  rejectAll: "לדחות הכול",
  customize: "התאמה אישית",
  save: "שמירת הבחירות",
  alwaysOnLabel: "פעיל תמיד",
  privacyPolicyLabel: "מדיניות הפרטיות",
};
const TEXTS = { en: POLICY_TEXTS.en, he: HEBREW };

/** 400 % zoom of a 1280 × 1024 window: WCAG 1.4.10's reflow width. */
const NARROW = { width: 320, height: 256 };

/**
 * axe-core against everything a visitor sees, in real Chromium: the banner in each layout at each
 * position, its first view and its category view, in the default and in brand colours, right to
 * left at 320 CSS px with reduced motion; and the preferences page behind `managePreferences`,
 * with its saved notice, and its expired and altered link pages. No violation anywhere.
 */
describe.skipIf(skipBrowserTests)("accessibility audit (axe-core, WCAG 2.2 AA) in Chromium", () => {
  // The daemon's clock, moved on to expire a preferences link.
  const clock = { skewMs: 0 };
  const ctx = useBrowserSite({}, () => new Date(Date.now() + clock.skewMs));
  const tab = useTestPage(() => ctx.browser);

  /** Audits the open banner's first view, then opens its category view and audits that. */
  async function auditBothViews(what: string, customize = "Customize", save = "Save choices") {
    const first = `${what}, first view`;
    expect(report(first, await auditBanner(tab.page, first, TAGS)), first).toBe("");
    await dialog(tab.page).getByRole("button", { name: customize }).click();
    await expect
      .poll(() => dialog(tab.page).getByRole("button", { name: save }).isVisible())
      .toBe(true);
    const categories = `${what}, Customize open`;
    expect(report(categories, await auditBanner(tab.page, categories, TAGS)), categories).toBe("");
  }

  // Each layout at each position, each in the defaults at two positions and in brand colours at
  // one, or the other way round, so each layout and each position meets both palettes.
  const positions = ["top", "bottom", "center"] as const;
  for (const [i, layout] of (["banner", "modal", "inline"] as const).entries()) {
    it(`has no violations in the ${layout} layout at top, bottom and center, first view and Customize`, async () => {
      for (const [j, position] of positions.entries()) {
        const brand = (i + j) % 2 === 1;
        const colors = brand ? BRAND : {};
        await openBanner(ctx, tab.page, { layout, position, categories: CATEGORIES, ...colors });
        await auditBothViews(`${layout} ${position}${brand ? ", brand colours" : ""}`);
      }
      expect(tab.warnings).toEqual([]);
    });
  }

  /** What moves in the banner: running animations, and any animation or transition it sets. */
  const motion = (page: Page) =>
    page.evaluate(() => {
      const shadow = document.querySelector("[id^=consent-banner-]")?.shadowRoot;
      if (!shadow) throw new Error("the banner has no open shadow root");
      return [
        ...shadow.getAnimations().map((animation) => `running ${animation.id}`),
        ...Array.from(shadow.querySelectorAll("*")).flatMap((element) => {
          const style = getComputedStyle(element);
          return style.animationName !== "none" || style.transitionDuration !== "0s"
            ? [`${element.tagName}: ${style.animationName} ${style.transitionDuration}`]
            : [];
        }),
      ];
    });

  /** How far the page and the banner's panel scroll sideways (WCAG 1.4.10: not at all). */
  const sideways = (page: Page) =>
    page.evaluate(() => {
      const page = document.documentElement;
      const panel = document
        .querySelector("[id^=consent-banner-]")
        ?.shadowRoot?.querySelector<HTMLElement>("[role=dialog]");
      return [
        page.scrollWidth - page.clientWidth,
        (panel?.scrollWidth ?? 0) - (panel?.clientWidth ?? 0),
      ];
    });

  it("has no violations right to left at 320 CSS px with reduced motion, where nothing moves or scrolls sideways", async () => {
    await tab.page.setViewportSize(NARROW);
    await tab.page.emulateMedia({ reducedMotion: "reduce" });
    for (const layout of ["banner", "modal", "inline"]) {
      const configuration = { layout, position: "bottom", categories: CATEGORIES, texts: TEXTS };
      await openBanner(ctx, tab.page, configuration, "he");
      expect(await dialog(tab.page).evaluate((panel) => getComputedStyle(panel).direction)).toBe(
        "rtl",
      );
      await auditBothViews(`${layout} bottom, Hebrew at 320 px`, HEBREW.customize, HEBREW.save);
      expect([layout, ...(await sideways(tab.page))]).toEqual([layout, 0, 0]);
      expect([layout, ...(await motion(tab.page))]).toEqual([layout]);
    }
    expect(tab.warnings).toEqual([]);
  });

  /** Audits the whole page the browser shows (the service's own, every element of it ours). */
  async function auditPage(what: string) {
    const result = await audit(tab.page, undefined, TAGS);
    expect(result.nodes, `${what}: nodes axe checked`).toBeGreaterThan(5);
    expect(result.contrastNodes, `${what}: texts whose contrast axe checked`).toBeGreaterThan(0);
    expect(report(what, result), `${what}: axe violations`).toBe("");
  }

  it("has no violations on the preferences page, its saved notice, and its expired and altered link pages", async () => {
    const { publicId } = await bannerFixture(ctx.service, {
      configuration: { categories: CATEGORIES, texts: TEXTS, ...BRAND },
    });
    /** The managePreferences link of a choice in `languageCode`, on this test's gateway. */
    const linkOf = async (languageCode: string) => {
      const logged = await postLog(ctx.service, aChoice(publicId, { languageCode }));
      expect(logged.status).toBe(200);
      return `${ctx.service.gatewayUrl}${new URL(logged.body.managePreferences).pathname}`;
    };
    const link = await linkOf("en");
    const open = async (url: string, status: number) => {
      expect((await tab.page.goto(url))?.status(), url).toBe(status);
    };

    await open(link, 200);
    await auditPage("preferences page, brand colours");
    await tab.page.getByRole("button", { name: "Save choices" }).click();
    await tab.page.waitForURL(/\?saved=/);
    expect(await tab.page.getByRole("status").isVisible()).toBe(true);
    await auditPage("preferences page, saved notice");

    await tab.page.setViewportSize(NARROW);
    await open(await linkOf("he"), 200);
    expect(await tab.page.locator("html").getAttribute("dir")).toBe("rtl");
    expect(await tab.page.evaluate(() => document.documentElement.scrollWidth)).toBe(NARROW.width);
    await auditPage("preferences page, Hebrew at 320 px");
    // Chromium reports the failure pages' 403 in the console; nothing else may be there.
    expect(tab.warnings).toEqual([]);

    // One character of the signed payload changed (the token's 11th): the link no longer checks.
    const at = link.lastIndexOf("/") + 11;
    const altered = `${link.slice(0, at)}${link[at] === "A" ? "B" : "A"}${link.slice(at + 1)}`;
    await open(altered, 403);
    expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
      "This link is not valid",
    );
    await auditPage("altered link page");

    clock.skewMs = PREFERENCES_LINK_TTL_MS + 60_000;
    try {
      await open(link, 403);
      expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
        "This link has expired",
      );
      await auditPage("expired link page");
    } finally {
      clock.skewMs = 0;
    }
  });
  it("has no violations on the preferences page in the dark scheme: the page, its saved notice, and a save refused as the link expired", async () => {
    await tab.page.emulateMedia({ colorScheme: "dark" });
    const { publicId } = await bannerFixture(ctx.service, {
      configuration: { categories: labelledCategories, texts: { en: POLICY_TEXTS.en } },
    });
    const logged = await postLog(ctx.service, aChoice(publicId));
    const link = `${ctx.service.gatewayUrl}${new URL(logged.body.managePreferences).pathname}`;
    const background = () =>
      tab.page.evaluate(() => getComputedStyle(document.body).backgroundColor);

    expect((await tab.page.goto(link))?.status()).toBe(200);
    expect(await background()).toBe("rgb(18, 18, 18)");
    await auditPage("preferences page, dark scheme");
    await tab.page.getByRole("button", { name: "Save choices" }).click();
    await tab.page.waitForURL(/\?saved=/);
    expect(await tab.page.title()).toBe("Your choices have been saved – We value your privacy");
    await auditPage("preferences page, saved notice, dark scheme");

    // The page stays open past the link's 30 minutes; its save is refused, and says so.
    clock.skewMs = PREFERENCES_LINK_TTL_MS + 60_000;
    try {
      const refused = tab.page.waitForResponse(
        (response) => response.request().method() === "POST",
      );
      await tab.page.getByRole("button", { name: "Save choices" }).click();
      expect((await refused).status()).toBe(403);
      await tab.page.waitForLoadState();
      expect(await tab.page.title()).toBe("Your choices were not saved – This link has expired");
      expect(await tab.page.getByRole("heading", { level: 1 }).textContent()).toBe(
        "Your choices were not saved",
      );
      expect(await background()).toBe("rgb(18, 18, 18)");
      await auditPage("refused save page, dark scheme");
    } finally {
      clock.skewMs = 0;
    }
  });
});
