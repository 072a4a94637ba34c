import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { AxeResults, ImpactValue } from "axe-core";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { contrastShortfalls, DEFAULT_COLORS } from "#daemon/banners/colors.js";
import { shortfallMessage } from "#daemon/banners/contrast.js";
import { dialog, skipBrowserTests, useBrowserSite, useTestPage } from "#test/support/browser.js";
import {
  aChoice,
  bannerFixture,
  labelledCategories,
  postLog,
  storedRows,
} from "#test/support/consent-log.js";

/** axe-core's browser build, injected into each page under test (never fetched by the page). */
const AXE_SOURCE = readFileSync(
  path.join(path.dirname(createRequire(import.meta.url).resolve("axe-core")), "axe.min.js"),
  "utf8",
);

/** WCAG 2.0, 2.1 and 2.2 at levels A and AA: what the issue asks the banner and the page to meet. */
const WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"];

const categories = labelledCategories;
/** A policy link in the description, so link rules (name, distinguishable in text) apply. */
const texts = { en: { privacyPolicyUrl: "https://shop.example.com/privacy" } };

interface Audit {
  violations: {
    id: string;
    impact: ImpactValue | undefined;
    help: string;
    helpUrl: string;
    nodes: { html: string; target: unknown; failureSummary: string | undefined }[];
  }[];
  /** Nodes axe checked (passed, failed or left for review) whose selector crosses a shadow root. */
  shadowNodes: number;
  /** Nodes axe checked at all. */
  nodes: number;
  /** Texts whose contrast axe decided (passed or failed; not those it left for review). */
  contrastNodes: number;
}

/**
 * Runs axe-core in the page with the WCAG A/AA tags, on the element `selector` names (and its
 * open shadow root) or on the whole document. The source goes in through the DevTools protocol,
 * so the page's strict CSP (scripts by nonce only) stays as it is.
 */
async function audit(page: Page, selector?: string): Promise<Audit> {
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(
    async ({ selector, tags }) => {
      const axe = (window as unknown as { axe: { run(...args: unknown[]): Promise<AxeResults> } })
        .axe;
      const context = selector ? document.querySelector(selector) : document;
      if (!context) throw new Error(`nothing matches ${selector}`);
      const results = await axe.run(context, { runOnly: { type: "tag", values: tags } });
      const checked = [...results.passes, ...results.violations, ...results.incomplete].flatMap(
        (rule) => rule.nodes,
      );
      return {
        violations: results.violations.map((rule) => ({
          id: rule.id,
          impact: rule.impact ?? undefined,
          help: rule.help,
          helpUrl: rule.helpUrl,
          nodes: rule.nodes.map((node) => ({
            html: node.html,
            target: node.target,
            failureSummary: node.failureSummary,
          })),
        })),
        shadowNodes: checked.filter((node) => node.target.some((part) => Array.isArray(part)))
          .length,
        nodes: checked.length,
        contrastNodes: [...results.passes, ...results.violations]
          .filter((rule) => rule.id === "color-contrast")
          .reduce((sum, rule) => sum + rule.nodes.length, 0),
      };
    },
    { selector, tags: WCAG_TAGS },
  );
}

/** The violations as readable text: rule, impact, help, then each failing node. Empty when none. */
function report(what: string, { violations }: Audit): string {
  return violations
    .map((rule) =>
      [
        `${what}: ${rule.id} (${rule.impact}) ${rule.help}`,
        `  ${rule.helpUrl}`,
        ...rule.nodes.flatMap((node) => [
          `  - target ${JSON.stringify(node.target)}`,
          `    html   ${node.html}`,
          ...(node.failureSummary ?? "").split("\n").map((line) => `    ${line}`),
        ]),
      ].join("\n"),
    )
    .join("\n\n");
}

/**
 * axe-core (WCAG 2.0/2.1/2.2 A and AA) against the banner in each layout, the modal's category
 * view and the preferences page, in real Chromium: no violation anywhere.
 */
describe.skipIf(skipBrowserTests)("accessibility (axe-core, WCAG 2.2 AA) in Chromium", () => {
  const ctx = useBrowserSite();
  const tab = useTestPage(() => ctx.browser);

  /**
   * A page longer than the window, as most are. On a page shorter than the window axe checks no
   * contrast in the modal at all: the modal sets `overflow: hidden` on <html>, and axe then takes
   * anything outside the <html> box for clipped, though the root's overflow applies to the
   * viewport and clips nothing (dequelabs/axe-core#3996).
   */
  const filler = Array.from({ length: 40 }, (_, i) => `<p>Paragraph ${i}</p>`).join("");

  /** A banner on localhost, open on a page of the site; resolves once its dialog shows. */
  async function openBanner(configuration: Record<string, unknown>) {
    const fixture = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories, texts, ...configuration },
    });
    await tab.page.goto(
      ctx.site.page(`/a11y-${fixture.publicId}`, {
        publicId: fixture.publicId,
        body: `<div data-consent-banner></div>${filler}`,
      }),
    );
    await expect.poll(() => dialog(tab.page).isVisible()).toBe(true);
  }

  /** Audits the banner's host element only (the test page's own markup does not count). */
  async function auditBanner(what: string): Promise<Audit> {
    const result = await audit(tab.page, "[id^=consent-banner-]");
    // axe really read the dialog inside the shadow root, contrast included: a clean result is
    // not an empty one.
    expect(result.shadowNodes, `${what}: nodes axe checked in the shadow root`).toBeGreaterThan(5);
    expect(result.contrastNodes, `${what}: texts whose contrast axe checked`).toBeGreaterThan(3);
    return result;
  }

  const layouts = [
    ["banner", "bottom"],
    ["modal", "center"],
    ["inline", "top"],
  ] as const;
  for (const [layout, position] of layouts) {
    it(`has no violations in the ${layout} layout at ${position}, banner open`, async () => {
      await openBanner({ layout, position });
      const what = `${layout} ${position}`;
      expect(report(what, await auditBanner(what)), `${what}: axe violations`).toBe("");
      expect(tab.warnings).toEqual([]);
    });
  }

  it("has no violations in the modal with its category view (Customize) open", async () => {
    await openBanner({ layout: "modal", position: "center" });
    await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
    await expect
      .poll(() => dialog(tab.page).getByRole("button", { name: "Save choices" }).isVisible())
      .toBe(true);
    const what = "modal center, Customize open";
    const result = await auditBanner(what);
    expect(report(what, result), `${what}: axe violations`).toBe("");
    expect(tab.warnings).toEqual([]);
  });

  it("keeps the panel's edge in forced colours, where its shadow is dropped", async () => {
    await tab.page.emulateMedia({ forcedColors: "active" });
    for (const layout of ["banner", "modal"]) {
      await openBanner({ layout, position: "center" });
      const edge = await dialog(tab.page).evaluate((panel) => {
        const style = getComputedStyle(panel);
        return [style.boxShadow, style.borderTopStyle, style.borderTopColor];
      });
      expect([layout, edge[0], edge[1]]).toEqual([layout, "none", "solid"]);
      expect(edge[2], `${layout}: the border takes a system colour`).not.toBe("rgba(0, 0, 0, 0)");
    }
  });

  it("judges configured colours as the runtime's own WCAG check does", async () => {
    // A brand palette that meets AA: no warning from the runtime, no violation from axe.
    const brand = { primaryColor: "#123456", secondaryColor: "#fafafa", textColor: "#222222" };
    await openBanner({ layout: "modal", position: "center", ...brand });
    await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
    const what = "modal center, brand colours, Customize open";
    expect(report(what, await auditBanner(what)), `${what}: axe violations`).toBe("");
    expect(tab.warnings).toEqual([]);
    // Faint text: the runtime warns of it, and axe fails the same three texts.
    await openBanner({ layout: "banner", position: "bottom", textColor: "#aaaaaa" });
    const faint = await auditBanner("banner bottom, faint text");
    expect(faint.violations.map((rule) => [rule.id, rule.nodes.length])).toEqual([
      ["color-contrast", 3], // the title, the description and the policy link
    ]);
    expect(tab.warnings).toEqual([
      expect.stringContaining("textColor on secondaryColor: contrast 2.32:1 is below WCAG 2.2 AA"),
    ]);
    // See-through colours count as what shows through them: nearly clear text, nearly clear
    // buttons (their white labels on the white background).
    tab.warnings.length = 0;
    await openBanner({
      layout: "banner",
      position: "bottom",
      textColor: "rgba(51, 51, 51, 0.15)",
      primaryColor: "#00000010",
    });
    const clear = await auditBanner("banner bottom, see-through text and buttons");
    expect(clear.violations.map((rule) => [rule.id, rule.nodes.length])).toEqual([
      ["color-contrast", 6], // the three texts and the three buttons
    ]);
    expect(tab.warnings).toEqual([
      // 1.3151:1, cut to two decimals (never rounded up).
      expect.stringContaining("textColor on secondaryColor: contrast 1.31:1 is below WCAG 2.2 AA"),
      expect.stringContaining(
        "secondaryColor on primaryColor (buttons): contrast 1.15:1 is below WCAG 2.2 AA",
      ),
    ]);
  });

  it("warns of the same pairs at the same ratios as the server's reading (consentctl, the preferences page)", async () => {
    const cases = [
      // 4.4994:1: cut to 4.49, never rounded up to a 4.50 that reads as passing.
      { text: "#058a24" },
      { text: "hsl(0 0% 60% / 0.9)", primary: "rgb(20% 60% 40%)", accent: "lightblue" },
      { text: "rgba(51, 51, 51, 0.15)", primary: "#00000010", secondary: "ivory" },
    ];
    for (const colors of cases) {
      tab.warnings.length = 0;
      const configured = { ...DEFAULT_COLORS, ...colors };
      await openBanner({
        primaryColor: configured.primary,
        secondaryColor: configured.secondary,
        textColor: configured.text,
        accentColor: configured.accent,
      });
      const server = contrastShortfalls(configured).map(shortfallMessage);
      expect(server.length, JSON.stringify(colors)).toBeGreaterThan(0);
      expect(tab.warnings).toEqual(server.map((message) => `[consent banner] ${message}`));
    }
    expect(tab.warnings).toContainEqual(
      "[consent banner] textColor on secondaryColor: contrast 1.31:1 is below WCAG 2.2 AA (4.5:1)",
    );
  });

  it("has no violations on the preferences page, with and without its saved notice", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, {
      configuration: { categories, texts },
    });
    const logged = await postLog(ctx.service, aChoice(publicId, { languageCode: "en" }));
    expect(logged.status).toBe(200);
    // The link names CONSENT_BASE_URL; its path on this test's gateway is the same page.
    const link = `${ctx.service.gatewayUrl}${new URL(logged.body.managePreferences).pathname}`;
    const [row] = await storedRows(ctx.service, teamId);
    const views = [
      ["preferences page", link],
      ["preferences page, saved notice", `${link}?saved=${row?.id}`],
    ] as const;
    for (const [what, url] of views) {
      expect((await tab.page.goto(url))?.status()).toBe(200);
      expect(await tab.page.getByRole("button", { name: "Save choices" }).isVisible()).toBe(true);
      const result = await audit(tab.page);
      expect(result.nodes, `${what}: nodes axe checked`).toBeGreaterThan(5);
      expect(result.contrastNodes, `${what}: texts whose contrast axe checked`).toBeGreaterThan(3);
      expect(report(what, result), `${what}: axe violations`).toBe("");
    }
    expect(await tab.page.getByRole("status").isVisible()).toBe(true);
    expect(tab.warnings).toEqual([]);
  });
});
