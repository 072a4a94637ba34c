import type { Locator } from "playwright-core";
import { describe, expect, it } from "vitest";
import { http } from "#test/support/api.js";
import {
  dialog,
  localBanner,
  skipBrowserTests,
  stateOf,
  useBrowserSite,
  useTestPage,
  waitForRows,
} from "#test/support/browser.js";
import { labelledCategories } from "#test/support/consent-log.js";

/** A shop's categories with the services (vendors) each covers; social names none. */
const categories = [
  { name: "necessary", required: true, label: "Necessary", services: ["Shop session"] },
  {
    name: "analytics",
    label: "Analytics",
    description: "Usage statistics",
    services: ["Matomo", "Google Analytics"],
  },
  { name: "marketing", label: "Marketing", services: ["Google Ads", "Meta Pixel"] },
  { name: "social", label: "Social" },
];

/** What a box's aria-describedby points at, in order, as a screen reader reads it. */
const descriptionOf = (box: Locator) =>
  box.evaluate((element) =>
    (element.getAttribute("aria-describedby") ?? "")
      .split(" ")
      .filter(Boolean)
      .map((id) => (element.getRootNode() as ShadowRoot).getElementById(id)?.textContent),
  );

/**
 * spec 2.4 `services` and decisions §3 (a category's services) in real Chromium: the Customize view
 * lists each category's services under it, and the state the runtime writes (getState, its
 * cookie, its row, consent:change) names the accepted categories' services.
 */
describe.skipIf(skipBrowserTests)("banner runtime in Chromium: category services", () => {
  const ctx = useBrowserSite();
  const tab = useTestPage(() => ctx.browser);

  /**
   * A localhost banner of the categories above (or those `configuration` names), and its page in
   * `lang`, opened in the test's tab.
   */
  async function bannerPage(configuration: Record<string, unknown>, lang?: string) {
    const { categories: own = categories, ...rest } = configuration;
    const fixture = await localBanner(ctx.service, own as object[], rest);
    const url = (language?: string) =>
      ctx.site.page(`/${fixture.publicId}-${language}`, {
        publicId: fixture.publicId,
        lang: language,
      });
    await tab.page.goto(url(lang));
    return { ...fixture, url };
  }

  it("lists each category's services under it in Customize, as part of its box's description", async () => {
    await bannerPage({});
    const view = dialog(tab.page);
    await view.getByRole("button", { name: "Customize" }).click();
    const line = view.getByText("Services: Google Ads, Meta Pixel", { exact: true });
    expect(await line.isVisible()).toBe(true);
    expect(await view.getByText("Services: Shop session", { exact: true }).isVisible()).toBe(true);
    expect(
      await descriptionOf(view.getByRole("checkbox", { name: "Analytics", exact: true })),
    ).toEqual(["Usage statistics", "Services: Matomo, Google Analytics"]);
    expect(
      await descriptionOf(view.getByRole("checkbox", { name: "Marketing", exact: true })),
    ).toEqual(["Services: Google Ads, Meta Pixel"]);
    // A category that names no services shows no line and has no description.
    expect(
      await descriptionOf(view.getByRole("checkbox", { name: "Social", exact: true })),
    ).toEqual([]);
    expect(await view.getByText(/^Services:/).count()).toBe(3);
  });

  it("says the label in the banner's language, and in English, marked so, where its texts do not", async () => {
    const texts = { de: { servicesLabel: "Dienste" }, fr: { title: "Vos choix" } };
    const { url } = await bannerPage({ texts }, "de");
    const view = dialog(tab.page);
    await view.getByRole("button", { name: "Customize" }).click();
    const german = view.getByText("Dienste: Google Ads, Meta Pixel", { exact: true });
    expect(await german.getAttribute("lang")).toBeNull();
    await tab.page.goto(url("fr"));
    await view.getByRole("button", { name: "Customize" }).click();
    const english = view.getByText("Services: Google Ads, Meta Pixel", { exact: true });
    expect([await english.getAttribute("lang"), await english.getAttribute("dir")]).toEqual([
      "en",
      "ltr",
    ]);
  });

  it("writes the accepted categories' services into the state, its cookie, its row and its event", async () => {
    const { teamId, key, publicId } = await bannerPage({});
    await tab.page.evaluate(() =>
      addEventListener("consent:change", (event) => {
        (window as unknown as { changed: unknown }).changed = (event as CustomEvent).detail;
      }),
    );
    const view = dialog(tab.page);
    await view.getByRole("button", { name: "Customize" }).click();
    await view.getByRole("checkbox", { name: "Analytics", exact: true }).check();
    await view.getByRole("checkbox", { name: "Social", exact: true }).check();
    await view.getByRole("button", { name: "Save choices" }).click();
    const services = {
      necessary: ["Shop session"],
      analytics: ["Matomo", "Google Analytics"],
    };
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).toMatchObject({
      method: "consent_given",
      preferences: { necessary: true, analytics: true, marketing: false, social: true },
      services,
    });
    const state = (await stateOf(tab.page)) as Record<string, unknown>;
    expect(state).toMatchObject({ categories: ["necessary", "analytics", "social"], services });
    expect(
      await tab.page.evaluate(() => (window as unknown as { changed: unknown }).changed),
    ).toEqual({ consentState: state, source: "choice" });
    const cookie = (await tab.context.cookies()).find((c) => c.name.startsWith("consent_"));
    expect(JSON.parse(decodeURIComponent(cookie?.value ?? ""))).toEqual(state);
    // The integrator's backend stores the state as the page exposes it (spec 4.6).
    const put = await http(ctx.service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { bannerId: publicId, subjectId: "visitor-1", baseVersion: 0, consentState: state },
    });
    expect([put.status, put.body.data?.consentState]).toEqual([200, state]);

    // Reject all keeps the required categories' services alone.
    await tab.page.reload();
    await tab.page.evaluate(() =>
      (
        window as unknown as { consentBanner: { showPreferences(): void } }
      ).consentBanner.showPreferences(),
    );
    await view.getByRole("button", { name: "Reject all" }).click();
    const [, rejected] = await waitForRows(ctx.service, teamId, 2);
    expect(rejected).toMatchObject({
      method: "consent_changed",
      services: { necessary: ["Shop session"] },
    });
    expect(await stateOf(tab.page)).toMatchObject({ services: { necessary: ["Shop session"] } });
  });

  it("writes no services where the banner names none, as before", async () => {
    const { teamId } = await bannerPage({ categories: labelledCategories });
    const view = dialog(tab.page);
    await view.getByRole("button", { name: "Customize" }).click();
    expect(await view.getByText(/^Services:/).count()).toBe(0);
    await view.getByRole("button", { name: "Accept all" }).click();
    const [row] = await waitForRows(ctx.service, teamId, 1);
    expect(row).not.toHaveProperty("services");
    expect(await stateOf(tab.page)).not.toHaveProperty("services");
  });
});
