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

  const rejected = { necessary: true, analytics: false, marketing: false };

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
    const { teamId, url } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).toMatchObject({ method: "accept_necessary", preferences: rejected });
    await tab.page.goto(url);
    await tab.page.waitForFunction(() => "consentBanner" in window);
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
    const { teamId, url } = await bannerPage();
    await dialog(tab.page).getByRole("button", { name: "Reject all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).toMatchObject({ method: "accept_necessary", preferences: rejected });
    await tab.page.goto(url);
    await tab.page.waitForFunction(() => "consentBanner" in window);
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
});
