import { describe, expect, it } from "vitest";
import { contrastShortfalls, DEFAULT_COLORS } from "#daemon/banners/colors.js";
import { shortfallMessage } from "#daemon/banners/contrast.js";
import { auditBanner, openBanner, report } from "#test/support/axe.js";
import { dialog, skipBrowserTests, useBrowserSite, useTestPage } from "#test/support/browser.js";

/**
 * The banner's colours in real Chromium: configured colours judged by axe-core as by the runtime's
 * own WCAG check, and the panel's edge in forced colours. The audit of every layout, position
 * and view is accessibility-audit.test.ts.
 */
describe.skipIf(skipBrowserTests)("banner colours and accessibility (axe-core) in Chromium", () => {
  const ctx = useBrowserSite();
  const tab = useTestPage(() => ctx.browser);

  it("keeps the panel's edge in forced colours, where its shadow is dropped", async () => {
    await tab.page.emulateMedia({ forcedColors: "active" });
    for (const layout of ["banner", "modal"]) {
      await openBanner(ctx, tab.page, { layout, position: "center" });
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
    await openBanner(ctx, tab.page, { layout: "modal", position: "center", ...brand });
    await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
    const what = "modal center, brand colours, Customize open";
    expect(report(what, await auditBanner(tab.page, what)), `${what}: axe violations`).toBe("");
    expect(tab.warnings).toEqual([]);
    // Faint text: the runtime warns of it, and axe fails the same three texts.
    await openBanner(ctx, tab.page, { layout: "banner", position: "bottom", textColor: "#aaaaaa" });
    const faint = await auditBanner(tab.page, "banner bottom, faint text");
    expect(faint.violations.map((rule) => [rule.id, rule.nodes.length])).toEqual([
      ["color-contrast", 3], // the title, the description and the policy link
    ]);
    expect(tab.warnings).toEqual([
      expect.stringContaining("textColor on secondaryColor: contrast 2.32:1 is below WCAG 2.2 AA"),
    ]);
    // See-through colours count as what shows through them: nearly clear text, nearly clear
    // buttons (their white labels on the white background).
    tab.warnings.length = 0;
    await openBanner(ctx, tab.page, {
      layout: "banner",
      position: "bottom",
      textColor: "rgba(51, 51, 51, 0.15)",
      primaryColor: "#00000010",
    });
    const clear = await auditBanner(tab.page, "banner bottom, see-through text and buttons");
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

  it("warns of low contrast once per page, not again each time the banner opens", async () => {
    await openBanner(ctx, tab.page, { layout: "banner", position: "bottom", textColor: "#aaaaaa" });
    expect(tab.warnings).toHaveLength(1);
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    await expect.poll(() => dialog(tab.page).isVisible()).toBe(false);
    await tab.page.evaluate(() =>
      (
        window as unknown as { consentBanner: { showPreferences(): void } }
      ).consentBanner.showPreferences(),
    );
    await expect.poll(() => dialog(tab.page).isVisible()).toBe(true);
    expect(tab.warnings).toHaveLength(1);
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
      const publicId = await openBanner(ctx, tab.page, {
        primaryColor: configured.primary,
        secondaryColor: configured.secondary,
        textColor: configured.text,
        accentColor: configured.accent,
      });
      const server = contrastShortfalls(configured).map(shortfallMessage);
      expect(server.length, JSON.stringify(colors)).toBeGreaterThan(0);
      // Named as every console line of the runtime names its banner.
      expect(tab.warnings).toEqual(
        server.map((message) => `consent banner ${publicId}: ${message}`),
      );
    }
    expect(tab.warnings).toContainEqual(
      expect.stringMatching(
        /^consent banner [\w-]+: textColor on secondaryColor: contrast 1\.31:1 is below WCAG 2\.2 AA \(4\.5:1\)$/,
      ),
    );
  });
});
