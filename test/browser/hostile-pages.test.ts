import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import {
  dialog,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
  useTestPage,
  waitForRows,
} from "#test/support/browser.js";
import { bannerFixture, labelledCategories } from "#test/support/consent-log.js";

/** The banner on pages whose own scripts and CSS work against it, as real sites' do. */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: hostile pages", () => {
  const ctx = useBrowserSite();
  const tab = useTestPage(() => ctx.browser);

  /** A banner on localhost and a page of the site embedding it, with `css` as its stylesheet. */
  async function bannerPage(configuration: Record<string, unknown> = {}, css = "") {
    const fixture = await bannerFixture(ctx.service, {
      domain: "localhost",
      configuration: { categories: labelledCategories, ...configuration },
    });
    ctx.site.file(`/site-${fixture.publicId}.css`, "text/css", css);
    const url = ctx.site.page(`/${fixture.publicId}`, {
      publicId: fixture.publicId,
      head: `<link rel="stylesheet" href="/site-${fixture.publicId}.css">`,
      body: `<p>${"Some page text. ".repeat(100)}</p>`,
    });
    await tab.page.goto(url);
    await tab.page.waitForFunction(() => "consentBanner" in window);
    return { ...fixture, url };
  }

  /**
   * Reject all on the page: the row says so, and the next page of the site is opened (its
   * banner's API in place), where the kept choice should hold.
   */
  async function rejectThenReload() {
    const { teamId, url } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    const preferences = { necessary: true, analytics: false, marketing: false };
    expect(row).toMatchObject({ method: "accept_necessary", preferences });
    await tab.page.goto(url);
    await tab.page.waitForFunction(() => "consentBanner" in window);
  }

  it("records and keeps a choice on a page that replaced sendBeacon, fetch and JSON.stringify after the loader ran", async () => {
    await tab.context.addInitScript(() =>
      addEventListener("DOMContentLoaded", () => {
        Navigator.prototype.sendBeacon = () => false;
        window.fetch = () => {
          throw new Error("this page's fetch wrapper refuses");
        };
        JSON.stringify = () => "{}";
      }),
    );
    await rejectThenReload();
    expect(await dialog(tab.page).count()).toBe(0);
    expect(tab.warnings).toEqual([]);
  });

  it("records and keeps a choice on a page whose library gave arrays a toJSON (Prototype.js)", async () => {
    await tab.context.addInitScript(() => {
      // Prototype.js 1.6's Array#toJSON: the array's JSON text, as a string.
      Object.assign(Array.prototype, {
        toJSON(this: unknown[]) {
          return `[${this.map((item) => `"${item}"`).join(", ")}]`;
        },
      });
    });
    await rejectThenReload();
    expect(await stateOf(tab.page)).toMatchObject({ categories: ["necessary"] });
    expect(await dialog(tab.page).count()).toBe(0);
  });

  it("records a choice where the page left neither sendBeacon nor a fetch that returns a promise", async () => {
    await tab.context.addInitScript(() => {
      Navigator.prototype.sendBeacon = () => {
        throw new Error("blocked");
      };
      // A polyfill that queues the request and returns nothing.
      const real = window.fetch;
      window.fetch = ((...args: Parameters<typeof fetch>) => {
        real(...args);
      }) as unknown as typeof fetch;
    });
    const { teamId } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row?.method).toBe("accept_all");
    expect(await stateOf(tab.page)).toMatchObject({ acceptType: "all" });
    expect(tab.warnings).toEqual([]);
  });

  /** The panel's box, its opacity and wrapping, and whether the page scrolls sideways. */
  const panelBox = (page: Page) =>
    page.evaluate(() => {
      const host = document.querySelector("[id^=consent-banner-]") as HTMLElement;
      const panel = host.shadowRoot?.querySelector("[role=dialog]") as HTMLElement;
      const box = panel.getBoundingClientRect();
      const style = getComputedStyle(panel);
      return {
        top: Math.round(box.top),
        bottom: Math.round(box.bottom),
        opacity: getComputedStyle(host).opacity,
        whiteSpace: style.whiteSpace,
        sideways: document.documentElement.scrollWidth > document.documentElement.clientWidth,
      };
    });

  it("keeps the page's CSS off the banner's host: a transform, opacity, nowrap, even !important", async () => {
    await tab.page.setViewportSize({ width: 320, height: 600 });
    for (const important of ["", " !important"]) {
      await bannerPage(
        { layout: "banner", position: "bottom" },
        `div { transform: translateZ(0)${important}; opacity: .2${important};
           white-space: nowrap${important}; text-transform: uppercase${important} }
         * { all: unset } button { display: none }`,
      );
      expect(await panelBox(tab.page)).toEqual(
        expect.objectContaining({
          bottom: 600,
          opacity: "1",
          whiteSpace: "normal",
          sideways: false,
        }),
      );
      // Visible and on top where it is: the click would reach it.
      await dialog(tab.page)
        .getByRole("button", { name: "Accept all" })
        .click({ trial: true, timeout: 2_000 });
    }
  });

  it("reflows at 320 CSS px and at 400% zoom, every button and checkbox at least 24 by 24 px", async () => {
    // 400% zoom of a 1280×1024 window: 320×256 CSS px.
    for (const [width, height] of [
      [320, 640],
      [320, 256],
    ] as const) {
      await tab.page.setViewportSize({ width, height });
      for (const [layout, position] of [
        ["banner", "bottom"],
        ["banner", "top"],
        ["modal", "center"],
      ]) {
        await bannerPage({ layout, position });
        await dialog(tab.page).getByRole("button", { name: "Customize" }).click();
        const seen = await tab.page.evaluate(() => {
          const host = document.querySelector("[id^=consent-banner-]") as HTMLElement;
          const panel = host.shadowRoot?.querySelector("[role=dialog]") as HTMLElement;
          const targets = Array.from(
            panel.querySelectorAll<HTMLElement>("button:not([hidden]), input"),
          );
          return {
            small: targets
              .map(
                (t) =>
                  [t.textContent || t.getAttribute("name"), t.getBoundingClientRect()] as const,
              )
              .filter(([, box]) => box.width < 24 || box.height < 24)
              .map(([name]) => name),
            sideways:
              document.documentElement.scrollWidth > document.documentElement.clientWidth ||
              panel.scrollWidth > panel.clientWidth,
          };
        });
        expect([width, height, layout, position, seen]).toEqual([
          width,
          height,
          layout,
          position,
          { small: [], sideways: false },
        ]);
        // The last control scrolls into the panel's view: reachable at any zoom.
        const save = dialog(tab.page).getByRole("button", { name: "Save choices" });
        await save.scrollIntoViewIfNeeded();
        const box = await save.boundingBox();
        expect(box && box.y >= 0 && box.y + box.height <= height).toBe(true);
      }
    }
  });
});
