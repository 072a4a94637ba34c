import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { AxeResults, ImpactValue } from "axe-core";
import type { Page } from "playwright-core";
import { expect } from "vitest";
import { dialog, type startSite } from "#test/support/browser.js";
import { bannerFixture, labelledCategories } from "#test/support/consent-log.js";
import type { TestService } from "#test/support/service.js";

/** axe-core's browser build, injected into each page under test (never fetched by the page). */
const AXE_SOURCE = readFileSync(
  path.join(path.dirname(createRequire(import.meta.url).resolve("axe-core")), "axe.min.js"),
  "utf8",
);

/** WCAG 2.0, 2.1 and 2.2 at levels A and AA: what the banner and the preferences page meet. */
export const WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"];

export interface Audit {
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
 * Runs axe-core in the page with `tags`, on the element `selector` names (and its open shadow
 * root) or on the whole document. The source goes in through the DevTools protocol, so the
 * page's strict CSP (scripts by nonce only) stays as it is.
 */
export async function audit(page: Page, selector?: string, tags = WCAG_TAGS): Promise<Audit> {
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
    { selector, tags },
  );
}

/** The violations as readable text: rule, impact, help, then each failing node. Empty when none. */
export function report(what: string, { violations }: Audit): string {
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
 * A page longer than the window, as most are. On a page shorter than the window axe checks no
 * contrast in the modal at all: the modal sets `overflow: hidden` on <html>, and axe then takes
 * anything outside the <html> box for clipped, though the root's overflow applies to the
 * viewport and clips nothing (dequelabs/axe-core#3996).
 */
const FILLER = Array.from({ length: 40 }, (_, i) => `<p>Paragraph ${i}</p>`).join("");

/** A policy link in the description, so link rules (name, distinguishable in text) apply. */
export const POLICY_TEXTS = { en: { privacyPolicyUrl: "https://shop.example.com/privacy" } };

/**
 * A banner on localhost (labelled categories, the policy link, then `configuration`), open on a
 * page of the site in `page` (`lang` for its `<html lang>`); resolves with its public ID once its
 * dialog shows.
 */
export async function openBanner(
  ctx: { service: TestService; site: Awaited<ReturnType<typeof startSite>> },
  page: Page,
  configuration: Record<string, unknown>,
  lang = "en",
): Promise<string> {
  const fixture = await bannerFixture(ctx.service, {
    domain: "localhost",
    configuration: { categories: labelledCategories, texts: POLICY_TEXTS, ...configuration },
  });
  await page.goto(
    ctx.site.page(`/a11y-${fixture.publicId}`, {
      publicId: fixture.publicId,
      lang,
      body: `<div data-consent-banner></div>${FILLER}`,
    }),
  );
  await expect.poll(() => dialog(page).isVisible()).toBe(true);
  return fixture.publicId;
}

/**
 * Audits the banner's host element only (the test page's own markup does not count), and checks
 * that axe really read the dialog inside the shadow root, contrast included: a clean result is
 * not an empty one.
 */
export async function auditBanner(page: Page, what: string, tags = WCAG_TAGS): Promise<Audit> {
  const result = await audit(page, "[id^=consent-banner-]", tags);
  expect(result.shadowNodes, `${what}: nodes axe checked in the shadow root`).toBeGreaterThan(5);
  expect(result.contrastNodes, `${what}: texts whose contrast axe checked`).toBeGreaterThan(3);
  return result;
}
