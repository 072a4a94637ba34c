import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PREFERENCES_LINK_TTL_MS } from "#daemon/consent-log/preference-links.js";
import { PAGE_LANGUAGES, pageTexts } from "#gateway/preferences/page-texts.js";
import { createBanner, http, operator, rawHttp } from "#test/support/api.js";
import {
  aChoice,
  alteredLink,
  bannerFixture,
  ipSource,
  postLog,
  storedRows,
  useVisitorService,
} from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

const configuration = {
  categories: [
    { name: "necessary", required: true, label: "Necessary" },
    { name: "analytics", label: "Analytics", description: "Usage statistics" },
    { name: "marketing", label: "Marketing" },
  ],
  texts: {
    de: {
      title: "Datenschutz-Einstellungen",
      save: "Speichern",
      privacyPolicyUrl: "https://shop.example.com/datenschutz",
      privacyPolicyLabel: "Datenschutzerklärung",
      alwaysOnLabel: "Immer aktiv",
    },
  },
};

/** decisions §5: the page behind managePreferences, its form, and expired or altered links. */
describe("GET and POST /preferences/{token}", () => {
  const ctx = useVisitorService("2026-11-22T12:00:00.000Z");
  const ip = ipSource();

  /** Records a choice and returns the gateway path of its preferences link. */
  async function linkFor(publicId: string, fields: Record<string, unknown> = {}) {
    const result = await postLog(ctx.service, aChoice(publicId, fields), { ip: ip() });
    return new URL(result.body.managePreferences).pathname;
  }

  it("shows the banner's categories with the current choice, in the choice's language", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const page = await http(ctx.service, "GET", await linkFor(publicId, { languageCode: "de" }));
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.headers.get("referrer-policy")).toBe("same-origin");
    expect(page.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
    expect(page.headers.get("content-security-policy")).toMatch(/frame-ancestors 'none'/);
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.text).toContain('<html lang="de">');
    expect(page.text).toContain(
      '<h1>Datenschutz-Einstellungen</h1>\n<p class="site">shop.example.com</p>',
    );
    expect(page.text).toContain(
      '<input type="checkbox" checked disabled aria-labelledby="l0 n0"><span><b id="l0" dir="auto">Necessary</b> <i id="n0">Immer aktiv</i>',
    );
    expect(page.text).toContain(
      '<input type="checkbox" checked name="category" value="analytics" aria-labelledby="l1" aria-describedby="s1">',
    );
    expect(page.text).toContain(
      '<input type="checkbox" name="category" value="marketing" aria-labelledby="l2">',
    );
    expect(page.text).toContain('<small id="s1" dir="auto">Usage statistics</small>');
    expect(page.text).toContain(
      '<a href="https://shop.example.com/datenschutz">Datenschutzerklärung</a>',
    );
    expect(page.text).toContain("<small>Dieser Link ist bis 12:30 UTC gültig.</small>");
    // The texts the banner lacks in German are English, and say so (WCAG 3.1.2); the category's
    // own label and description are in no stated language: they take only their own direction.
    expect(page.text).toContain('<p lang="en" dir="ltr">We use cookies and similar technologies');
    expect(page.text).toContain('<legend lang="en" dir="ltr">Customize</legend>');
    expect(page.text).toContain('<button type="submit">Speichern</button>');
  });

  it("writes a right-to-left language's page right to left, its English fallbacks left to right", async () => {
    const { publicId } = await bannerFixture(ctx.service, {
      configuration: { ...configuration, texts: { ar: { title: "خصوصيتك" } } },
    });
    const page = await http(ctx.service, "GET", await linkFor(publicId, { languageCode: "ar" }));
    expect(page.status).toBe(200);
    expect(page.text).toContain('<html lang="ar" dir="rtl">');
    expect(page.text).toContain("<h1>خصوصيتك</h1>");
    expect(page.text).toContain('<button type="submit" lang="en" dir="ltr">Save choices</button>');
    // The page's own sentence, which it does not ship in Arabic, is English and says so.
    expect(page.text).toContain(
      '<small lang="en" dir="ltr">This link works until 12:30 UTC.</small>',
    );
  });

  it("writes a banner's texts, labels and privacy policy address into the page as text, never as markup", async () => {
    const hostile = '"><script>alert(1)</script><img src=x onerror=a()>';
    const { publicId } = await bannerFixture(ctx.service, {
      configuration: {
        categories: [
          { name: "necessary", required: true, label: `</b>${hostile}` },
          { name: "analytics", label: hostile, description: `</small>${hostile}` },
        ],
        texts: {
          en: {
            title: `</title>${hostile}`,
            description: hostile,
            save: hostile,
            privacyPolicyUrl: `https://shop.example.com/${hostile.replaceAll(" ", "")}`,
            privacyPolicyLabel: hostile,
            alwaysOnLabel: hostile,
          },
        },
      },
    });
    const page = await http(ctx.service, "GET", await linkFor(publicId, { languageCode: "en" }));
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/<script|<img/i);
    const escaped = "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=a()&gt;";
    expect(page.text).toContain(`<b id="l1" dir="auto">${escaped}</b>`);
    expect(page.text).toContain(
      `<a href="https://shop.example.com/${escaped.replaceAll(" ", "")}">${escaped}</a>`,
    );
  });

  it("keeps the whole page in English when the banner has no texts in the choice's language", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const page = await http(ctx.service, "GET", await linkFor(publicId, { languageCode: "fr" }));
    expect(page.status).toBe(200);
    expect(page.text).toContain('<html lang="en">');
    expect(page.text).toContain("<h1>We value your privacy</h1>");
    expect(page.text).toContain("<small>This link works until 12:30 UTC.</small>");
    // The operator's privacy policy stays, from the only texts that give its address, and says
    // it is a page in their language.
    expect(page.text).toContain(
      '<p><a href="https://shop.example.com/datenschutz" hreflang="de">Privacy policy</a></p>',
    );
  });

  /**
   * The colours the page's stylesheet gives its background, text, button and focus ring in the
   * light scheme: each rule's value, its var() read from the first `:root` rule.
   */
  function pageColors(html: string) {
    const rule = (selector: string) =>
      new RegExp(`\\n${selector}\\{([^}]*)\\}`).exec(html)?.[1] ?? "";
    const declared = (declarations: string, property: string) =>
      new RegExp(`(?:^|;)${property}:([^;]*)`).exec(declarations)?.[1];
    const value = (declarations: string, property: string) =>
      declared(declarations, property)?.replace(
        /var\((--[a-z]+)\)/,
        (_, name: string) => declared(rule(":root"), name) ?? "",
      );
    return {
      background: value(rule("body"), "background"),
      text: value(rule("body"), "color"),
      button: value(rule("button"), "background"),
      buttonText: value(rule("button"), "color"),
      focusRing: value(rule(":focus-visible"), "outline")?.replace("3px solid ", ""),
    };
  }

  // decisions §3 colours on the page: each pair it shows meets WCAG 2.2 AA, the configured
  // colours where they do, the defaults of a failing pair where that mends it, else all defaults.
  // Configured: primary, secondary, text, accent. Shown: background, text, button, button text,
  // focus ring.
  it.each([
    [
      "keeps colours that meet AA, in any form the API accepts",
      ["rgb(18 52 86)", "ivory", "hsl(0 0% 13%)", "#0b5394"],
      ["ivory", "hsl(0 0% 13%)", "rgb(18 52 86)", "ivory", "#0b5394"],
    ],
    [
      "gives faint text (2.32:1) the default text and background, keeping the rest",
      ["#123456", "#ffffff", "#aaaaaa", "#0b5394"],
      ["#ffffff", "#333333", "#123456", "#ffffff", "#0b5394"],
    ],
    [
      "judges see-through text by what shows through it",
      ["#123456", "#fafafa", "rgba(0, 0, 0, 0.3)", "#0b5394"],
      ["#ffffff", "#333333", "#123456", "#ffffff", "#0b5394"],
    ],
    [
      "gives pale buttons (1.36:1) the default button colours and background, keeping the text",
      ["#f5d76e", "#fffbe6", "#1a1a1a", "#0b5394"],
      ["#ffffff", "#1a1a1a", "#000000", "#ffffff", "#0b5394"],
    ],
    [
      // The buttons (black on black) take the default white background, under white text.
      "takes the default colours wholesale when mending a pair breaks another",
      ["#000000", "#000000", "#ffffff", "#ffffff"],
      ["#ffffff", "#333333", "#000000", "#ffffff", "#007bff"],
    ],
  ])("%s", async (_, [primaryColor, secondaryColor, textColor, accentColor], shown) => {
    const { publicId } = await bannerFixture(ctx.service, {
      configuration: { ...configuration, primaryColor, secondaryColor, textColor, accentColor },
    });
    const page = await http(ctx.service, "GET", await linkFor(publicId));
    expect(page.status).toBe(200);
    const [background, text, button, buttonText, focusRing] = shown;
    expect(pageColors(page.text)).toEqual({ background, text, button, buttonText, focusRing });
  });

  it("records a change as consent_changed with the same consentId, then shows it saved", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const consentId = "7d1f8f3e-1c2b-4a5d-8e9f-0a1b2c3d4e5f";
    const path = await linkFor(publicId, { consentId, languageCode: "de", country: "DE" });
    const saved = await submit(path, {}, "category=marketing&category=unknown");
    expect(saved.status).toBe(303);
    const [row] = await storedRows(ctx.service, teamId);
    const next = new URL(saved.headers.get("location") ?? "", `${ctx.service.gatewayUrl}${path}`);
    expect(next.pathname + next.search).toBe(`${path}?saved=${row?.id}`);
    const page = await http(ctx.service, "GET", `${path}?saved=${row?.id}`);
    const notice =
      '<p class="status" role="status" tabindex="-1" autofocus>Ihre Auswahl wurde gespeichert.</p>';
    expect(page.text).toContain(notice);
    // The title says it too, in the page's language, before the operator's title.
    expect(page.text).toContain(
      "<title>Ihre Auswahl wurde gespeichert – Datenschutz-Einstellungen</title>",
    );
    expect(page.text).toContain(
      '<input type="checkbox" checked name="category" value="marketing" aria-labelledby="l2">',
    );
    // Only the save's own redirect says so: an address typed or from the history does not.
    for (const query of ["", "?saved=1", `?saved=${consentId}`]) {
      const other = await http(ctx.service, "GET", `${path}${query}`);
      expect([other.status, other.text.includes(notice)]).toEqual([200, false]);
      expect(other.text).toContain("<title>Datenschutz-Einstellungen</title>");
    }
    expect(row).toMatchObject({
      method: "consent_changed",
      consentId,
      preferences: { necessary: true, analytics: false, marketing: true },
      revision: 1,
      languageCode: "de",
      country: "DE",
      timestampClamped: false,
    });
    expect(row?.pageUrl).toBeUndefined();
    // No Sec-GPC header: no signal at choice time; no US opt-outs in the choice changed.
    expect([row?.gpc, row?.purposeChoices]).toEqual([false, undefined]);
  });

  it("lists each category's services under it, and records the accepted ones' services with a change", async () => {
    const withServices = {
      ...configuration,
      categories: [
        { name: "necessary", required: true, label: "Necessary", services: ["Shop session"] },
        {
          name: "analytics",
          label: "Analytics",
          description: "Usage statistics",
          services: ["Matomo"],
        },
        { name: "marketing", label: "Marketing", services: ["Google Ads", "Meta Pixel"] },
        { name: "social", label: "Social" },
      ],
      texts: { de: { ...configuration.texts.de, servicesLabel: "Dienste" } },
    };
    const { teamId, publicId } = await bannerFixture(ctx.service, {
      configuration: withServices,
    });
    const path = await linkFor(publicId, { languageCode: "de" });
    const page = await http(ctx.service, "GET", path);
    expect(page.status).toBe(200);
    // Part of each box's description, after the category's own; none where a category has none.
    for (const html of [
      '<input type="checkbox" checked disabled aria-labelledby="l0 n0" aria-describedby="v0">',
      '<small id="v0">Dienste: Shop session</small>',
      '<input type="checkbox" checked name="category" value="analytics" aria-labelledby="l1" aria-describedby="s1 v1">',
      '<small id="s1" dir="auto">Usage statistics</small><small id="v1">Dienste: Matomo</small>',
      '<small id="v2">Dienste: Google Ads, Meta Pixel</small>',
      '<input type="checkbox" name="category" value="social" aria-labelledby="l3">',
    ]) {
      expect(page.text).toContain(html);
    }
    expect(page.text).not.toContain('id="v3"');
    // In a language the banner has no texts in, the page is English, the label too.
    const french = await http(ctx.service, "GET", await linkFor(publicId, { languageCode: "fr" }));
    expect(french.text).toContain('<small id="v2">Services: Google Ads, Meta Pixel</small>');

    const saved = await submit(path, {}, "category=marketing&category=social");
    expect(saved.status).toBe(303);
    const [row] = await storedRows(ctx.service, teamId);
    expect(row).toMatchObject({
      method: "consent_changed",
      preferences: { necessary: true, analytics: false, marketing: true, social: true },
      services: { necessary: ["Shop session"], marketing: ["Google Ads", "Meta Pixel"] },
    });
    // A banner without services records rows without them, as before.
    const { teamId: otherTeam, publicId: other } = await bannerFixture(ctx.service, {
      configuration,
    });
    expect((await submit(await linkFor(other))).status).toBe(303);
    const [plain] = await storedRows(ctx.service, otherTeam);
    expect(plain?.method).toBe("consent_changed");
    expect(plain).not.toHaveProperty("services");
  });

  /** The page right after a save of `path`: the redirect's address, read as the browser does. */
  async function pageAfterSave(path: string) {
    const saved = await submit(path);
    expect(saved.status).toBe(303);
    const next = new URL(saved.headers.get("location") ?? "", `${ctx.service.gatewayUrl}${path}`);
    return http(ctx.service, "GET", next.pathname + next.search);
  }

  it("keeps the title after a save in one language, its heading's, whatever the page's own words are in", async () => {
    // Texts in a language the page does not ship: its own words are English, and the title says
    // the choices were saved in those words alone, marked English, never English words before a
    // Japanese title. Regression: the title stayed the heading alone, saying nothing of the save.
    const japanese = await bannerFixture(ctx.service, {
      configuration: {
        ...configuration,
        texts: { ja: { title: "プライバシー設定", save: "保存" } },
      },
    });
    const ja = await pageAfterSave(await linkFor(japanese.publicId, { languageCode: "ja" }));
    expect(ja.text).toContain('<html lang="ja">');
    expect(ja.text).toContain('<title lang="en" dir="ltr">Your choices have been saved</title>');
    expect(ja.text).toContain("<h1>プライバシー設定</h1>");
    expect(ja.text).toContain(
      '<p class="status" role="status" tabindex="-1" autofocus lang="en" dir="ltr">Your choices have been saved.</p>',
    );
    // German texts without a title: the heading is the English fallback, and so is the whole
    // title, marked English like the heading; the notice stays in the page's German.
    const untitled = await bannerFixture(ctx.service, {
      configuration: { ...configuration, texts: { de: { save: "Speichern" } } },
    });
    const de = await pageAfterSave(await linkFor(untitled.publicId, { languageCode: "de" }));
    expect(de.text).toContain('<html lang="de">');
    expect(de.text).toContain(
      '<title lang="en" dir="ltr">Your choices have been saved – We value your privacy</title>',
    );
    expect(de.text).toContain('<h1 lang="en" dir="ltr">We value your privacy</h1>');
    expect(de.text).toContain(
      '<p class="status" role="status" tabindex="-1" autofocus>Ihre Auswahl wurde gespeichert.</p>',
    );
  });

  it("records the form's Global Privacy Control signal, and US opt-outs where the changed choice had them", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId, {
      country: "US",
      region: "US-CA",
      gpc: true,
      preferences: { necessary: true, analytics: true, marketing: false },
      purposeChoices: { saleSharing: true, targetedAdvertising: true, sensitiveData: true },
    });
    // The visitor accepts marketing on the page: no longer opted out of sale and sharing.
    expect((await submit(path, { "sec-gpc": "1" }, "category=marketing")).status).toBe(303);
    const [accepted] = await storedRows(ctx.service, teamId);
    expect(accepted).toMatchObject({
      method: "consent_changed",
      preferences: { necessary: true, analytics: false, marketing: true },
      gpc: true,
      purposeChoices: { saleSharing: false, targetedAdvertising: false, sensitiveData: true },
    });
    expect((await submit(path, {}, "category=analytics")).status).toBe(303);
    const [refused] = await storedRows(ctx.service, teamId);
    expect(refused).toMatchObject({
      gpc: false,
      purposeChoices: { saleSharing: true, targetedAdvertising: true },
    });
  });

  /** POSTs the page's form to `path` with `headers`, as a browser or another client sends it. */
  function submit(path: string, headers: Record<string, string> = {}, body = "category=marketing") {
    return fetch(`${ctx.service.gatewayUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body,
      redirect: "manual",
    });
  }

  // Regression (audit A3): the current choice was the team's newest row of the consentId, so a
  // row another banner of the team logged with the same consentId took over the page and its save.
  it("shows and carries over the choice made on the link's banner, never another banner's with the same consentId", async () => {
    const { teamId, key, publicId } = await bannerFixture(ctx.service, { configuration });
    const other = await createBanner(ctx.service, key, { configuration });
    const consentId = "2b7c1d4e-5f60-4a71-8b92-a3b4c5d6e7f8";
    const path = await linkFor(publicId, {
      consentId,
      languageCode: "de",
      country: "DE",
      preferences: { necessary: true, analytics: true, marketing: false },
    });
    await linkFor(other.publicId, {
      consentId,
      languageCode: "fr",
      country: "FR",
      region: "IDF",
      matchedRuleId: "rule-of-the-other-banner",
      preferences: { necessary: true, analytics: false, marketing: true },
    });
    const page = await http(ctx.service, "GET", path);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<html lang="de">');
    expect(page.text).toContain(
      '<input type="checkbox" checked name="category" value="analytics" aria-labelledby="l1" aria-describedby="s1">',
    );
    expect(page.text).toContain(
      '<input type="checkbox" name="category" value="marketing" aria-labelledby="l2">',
    );
    expect((await submit(path, {}, "category=analytics")).status).toBe(303);
    const [saved] = await storedRows(ctx.service, teamId);
    expect(saved).toMatchObject({ method: "consent_changed", consentId, publicId });
    expect(saved).toMatchObject({ languageCode: "de", country: "DE" });
    expect(saved?.region).toBeUndefined();
    expect(saved?.matchedRuleId).toBeUndefined();
  });

  // Regression (audit B3): any site that learned a link could submit a form to it cross-site.
  it("refuses a form another site submits, by Sec-Fetch-Site or else by Origin, and records nothing", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const before = await storedRows(ctx.service, teamId);
    const gatewayOrigin = new URL(ctx.service.gatewayUrl).origin;
    const refusedHeaders: Record<string, string>[] = [
      { "sec-fetch-site": "cross-site", origin: "https://attacker.example" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site", origin: "https://other.shop.example.com" },
      { "sec-fetch-site": "none" },
      // A same-origin Origin does not outweigh the browser's own verdict.
      { "sec-fetch-site": "cross-site", origin: gatewayOrigin },
      { origin: "https://attacker.example" },
      { origin: "null" },
      { origin: gatewayOrigin.replace("http:", "https:") },
      { origin: "not a url" },
      // Origins no browser sends, read as the log route reads them (readOriginHeader): refused,
      // never taken for the origin they start with.
      { origin: `${gatewayOrigin}/x` },
      { origin: `${gatewayOrigin}/` },
      { origin: `${gatewayOrigin}?q` },
      { origin: `${gatewayOrigin}, ${gatewayOrigin}` },
      { origin: gatewayOrigin.replace("//", "//user@") },
      {
        origin: "https://consent.example.net:443",
        "x-forwarded-proto": "https",
        "x-forwarded-host": "consent.example.net",
      },
    ];
    for (const headers of refusedHeaders) {
      const refused = await submit(path, headers);
      expect([headers, refused.status]).toEqual([headers, 403]);
      expect(refused.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(await refused.text()).toContain("<h1>Your choices were not saved</h1>");
    }
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });

  it("saves the page's own form: same-origin, a matching Origin, or a client that sends neither", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const gatewayOrigin = new URL(ctx.service.gatewayUrl).origin;
    const acceptedHeaders: Record<string, string>[] = [
      { "sec-fetch-site": "same-origin", origin: gatewayOrigin },
      { "sec-fetch-site": "same-origin" },
      { origin: gatewayOrigin },
      {},
      // Behind a proxy named in CONSENT_TRUST_PROXY, its forwarded scheme and host are the page's.
      {
        origin: "https://consent.example.net",
        "x-forwarded-proto": "https",
        "x-forwarded-host": "consent.example.net",
      },
    ];
    for (const headers of acceptedHeaders) {
      const saved = await submit(path, headers);
      expect([headers, saved.status]).toEqual([headers, 303]);
    }
    const rows = await storedRows(ctx.service, teamId);
    expect(rows.filter((row) => row.method === "consent_changed")).toHaveLength(
      acceptedHeaders.length,
    );
  });

  it("refuses a submission that is not the page's form, and records nothing", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const before = await storedRows(ctx.service, teamId);
    const form = "application/x-www-form-urlencoded";
    for (const [type, body, encoding] of [
      ["application/json", '{"category":1}'],
      ["text/plain", "category=marketing"],
      ["", "category=marketing"],
      // A compressed form (no browser sends one) would read as no category ticked.
      [form, gzipSync("category=marketing"), "gzip"],
      [form, "category=marketing", "br"],
    ] as const) {
      const refused = await fetch(`${ctx.service.gatewayUrl}${path}`, {
        method: "POST",
        headers: { "content-type": type, ...(encoding && { "content-encoding": encoding }) },
        body,
        redirect: "manual",
      });
      expect(refused.status).toBe(415);
      expect(refused.headers.get("content-type")).toBe("text/html; charset=utf-8");
      const text = await refused.text();
      expect(text).toContain("<h1>Your choices were not saved</h1>");
      expect(text).toContain('<p><a href="">Open your privacy settings</a></p>');
    }
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
  });

  it("shows a clear page, 403 and no internals, for an expired link", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    ctx.clock.now += 30 * 60_000;
    const page = await http(ctx.service, "GET", path);
    expect(page.status).toBe(403);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(page.text).toContain("<h1>This link has expired</h1>");
    expect(page.text).not.toContain("<a href");
    expect(page.text).not.toMatch(/Error|at .*\.ts|stack/);
    const post = await http(ctx.service, "POST", path, { body: "category=analytics" });
    expect(post.status).toBe(403);
  });

  it("shows a failure's page in the browser's language when the page ships it", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    ctx.clock.now += 30 * 60_000;
    const cases: [string, string, string][] = [
      ["fr-CH, de;q=0.8, en;q=0.5", "fr", "<h1>Ce lien a expiré</h1>"],
      ["ja, de-AT;q=0.9", "de", "<h1>Dieser Link ist abgelaufen</h1>"],
      ["ja", "en", "<h1>This link has expired</h1>"],
    ];
    for (const [acceptLanguage, lang, title] of cases) {
      const page = await http(ctx.service, "GET", path, {
        headers: { "accept-language": acceptLanguage },
      });
      expect(page.status).toBe(403);
      expect(page.text).toContain(`<html lang="${lang}">`);
      expect(page.text).toContain(title);
    }
    const altered = await http(ctx.service, "GET", "/preferences/garbage", {
      headers: { "accept-language": "pl" },
    });
    expect(altered.text).toContain("<h1>Ten link jest nieprawidłowy</h1>");
  });

  it("shows a clear page for an altered or malformed link, which reveals nothing of the record", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const consentId = crypto.randomUUID();
    const path = await linkFor(publicId, { consentId });
    const token = path.split("/").at(-1) ?? "";
    const [payload = "", signature = ""] = token.split(".");
    // Sealed: neither id appears in the address, in any encoding.
    const bytes = Buffer.from(payload, "base64url").toString("hex");
    for (const id of [publicId, consentId]) {
      expect(bytes).not.toContain(id.replaceAll("-", ""));
      expect(token).not.toContain(id);
    }
    const flip = (text: string, at: number) =>
      text.slice(0, at) + (text[at] === "A" ? "B" : "A") + text.slice(at + 1);
    const altered = [
      `${flip(payload, 0)}.${signature}`, // the format's version
      `${flip(payload, 30)}.${signature}`, // a sealed id
      `${flip(payload, payload.length - 2)}.${signature}`, // the expiry
      `${payload}.${flip(signature, 3)}`,
      `${payload}.${flip(signature, signature.length - 1)}`,
      `${payload}.${signature}.x`,
      "garbage",
    ];
    for (const token of altered) {
      const page = await http(ctx.service, "GET", `/preferences/${encodeURIComponent(token)}`);
      expect([token, page.status]).toEqual([token, 403]);
      expect(page.text).toContain("<h1>This link is not valid</h1>");
    }
    // A path segment added to the link (a mail client's trailing slash): the same page, GET or
    // POST, the POST's saying first that the choices were not saved.
    for (const [method, suffix, heading] of [
      ["GET", "/", "<h1>This link is not valid</h1>\n<p>It may"],
      ["GET", "/x", "<h1>This link is not valid</h1>\n<p>It may"],
      ["POST", "/", "<h1>Your choices were not saved</h1>\n<p>This link is not valid. It may"],
    ] as const) {
      const page = await http(ctx.service, method, `${path}${suffix}`);
      expect([method, suffix, page.status]).toEqual([method, suffix, 403]);
      expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(page.text).toContain(heading);
    }
  });

  it("answers other methods with 405 and a page, and an unreadable link with the altered-link page", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    for (const method of ["PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"]) {
      const result = await rawHttp(ctx.service, method, path);
      expect([method, result.status, result.headers.get("allow")]).toEqual([
        method,
        405,
        "GET, POST, HEAD",
      ]);
      expect(result.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(result.text).toContain("<h1>Your choices were not saved</h1>");
    }
    for (const bad of ["%zz", `${path.split("/").at(-1)}${"A".repeat(60)}`, "A".repeat(5000)]) {
      const result = await rawHttp(ctx.service, "GET", `/preferences/${bad}`);
      expect([bad.slice(0, 20), result.status]).toEqual([bad.slice(0, 20), 403]);
      expect(result.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(result.text).toContain("<h1>This link is not valid</h1>");
      expect(result.text).not.toContain("AAAAAAAAAA");
    }
  });

  it("says a form too large was not saved", async () => {
    const { publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const result = await http(ctx.service, "POST", path, {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `category=${"x".repeat(1024 * 1024 + 1)}`,
    });
    expect(result.status).toBe(413);
    expect(result.text).toContain("<h1>Your choices were not saved</h1>");
  });

  it("allows 1,000 requests a minute per client IP, counted apart from the log route, then a 429 page", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const busy = ip();
    const path = new URL(
      (await postLog(ctx.service, aChoice(publicId), { ip: busy })).body.managePreferences,
    ).pathname;
    const statuses: number[] = [];
    for (let batch = 0; batch < 20; batch++) {
      const pages = await Promise.all(
        Array.from({ length: 50 }, () =>
          http(ctx.service, "GET", path, { headers: { "x-forwarded-for": busy } }),
        ),
      );
      statuses.push(...pages.map((page) => page.status));
    }
    expect(statuses.filter((status) => status === 200)).toHaveLength(1000);
    const limited = await http(ctx.service, "GET", path, { headers: { "x-forwarded-for": busy } });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(limited.text).not.toMatch(/Error|at .*\.ts|stack/);
    // The visit's page says why, to wait a minute and open the link again, and links to itself,
    // in the visitor's language where the page ships it.
    expect(limited.text).toContain("<title>Too many requests</title>");
    expect(limited.text).toContain(
      '<main><h1>Too many requests</h1>\n<p>This service received too many requests from your connection in a short time. Wait a minute, then open this link again.</p>\n<p><a href="">Open your privacy settings</a></p></main>',
    );
    const visitIn = (lang: string) =>
      http(ctx.service, "GET", path, {
        headers: { "x-forwarded-for": busy, "accept-language": lang },
      });
    const swedish = await visitIn("sv");
    expect(swedish.text).toContain(
      '<main><h1>För många förfrågningar</h1>\n<p>Tjänsten har fått för många förfrågningar från din anslutning på kort tid. Vänta en minut och öppna sedan länken igen.</p>\n<p><a href="">Öppna dina integritetsinställningar</a></p></main>',
    );
    const english = pageTexts("en").texts.errors.rate_limited[1];
    for (const lang of PAGE_LANGUAGES) {
      const { texts } = pageTexts(lang);
      const [title, text] = texts.errors.rate_limited;
      const page = await visitIn(lang);
      expect([lang, page.status, page.headers.get("retry-after")]).toEqual([
        lang,
        429,
        expect.stringMatching(/^\d+$/),
      ]);
      expect(page.text).toContain(`<html lang="${lang}">`);
      expect(page.text).toContain(
        `<main><h1>${title}</h1>\n<p>${text}</p>\n<p><a href="">${texts.openSettings}</a></p></main>`,
      );
      if (lang !== "en") expect([lang, page.text.includes(english)]).toEqual([lang, false]);
    }
    // A save over the limit says it was not saved, why, and to save again after a minute, from
    // the settings page it links back to.
    const before = await storedRows(ctx.service, teamId);
    const save = await submit(path, { "x-forwarded-for": busy, "accept-language": "sv" });
    expect([save.status, save.headers.get("retry-after")]).toEqual([
      429,
      expect.stringMatching(/^\d+$/),
    ]);
    const text = await save.text();
    expect(text).toContain("<title>Dina val sparades inte – För många förfrågningar</title>");
    expect(text).toContain(
      '<main><h1>Dina val sparades inte</h1>\n<p>Tjänsten har fått för många förfrågningar från din anslutning på kort tid. Vänta en minut, öppna sedan dina integritetsinställningar och spara dina val igen.</p>\n<p><a href="">Öppna dina integritetsinställningar</a></p></main>',
    );
    expect(await storedRows(ctx.service, teamId)).toHaveLength(before.length);
    // The log route is the address's own still.
    expect((await postLog(ctx.service, aChoice(publicId), { ip: busy })).status).toBe(200);
  });

  // A save refused while it is inactive: preferences-refused-saves.test.ts.
  it("shows a not-found page once the banner is inactive, and the page again once it is active", async () => {
    const { key, id, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    await http(ctx.service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    const page = await http(ctx.service, "GET", path);
    expect([page.status, page.headers.get("content-type")]).toEqual([
      404,
      "text/html; charset=utf-8",
    ]);
    expect(page.text).toContain(
      "<h1>These privacy settings are no longer available</h1>\n<p>The site no longer collects choices with this banner.</p>",
    );
    // Active again, the link works again until it expires.
    await http(ctx.service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: true } });
    expect((await http(ctx.service, "GET", path)).status).toBe(200);
  });

  it("keeps showing and saving a link's page after its team's plan changed", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service, { configuration });
    const path = await linkFor(publicId);
    const { admin, auth } = operator(ctx.service);
    for (const plan of ["free", "enterprise"]) {
      await admin.setTeamPlan({ id: teamId, plan }, auth);
      const page = await http(ctx.service, "GET", path);
      expect([plan, page.status]).toEqual([plan, 200]);
      expect(page.text).toContain('value="marketing"');
      expect([plan, (await submit(path)).status]).toEqual([plan, 303]);
    }
    const rows = await storedRows(ctx.service, teamId);
    expect(rows.filter((row) => row.method === "consent_changed")).toHaveLength(2);
  });
});

/**
 * A link's page as a visit (GET) and a save of the form (POST) get it: each one's status and the
 * title of its HTML page (`<title>`).
 */
async function visitAndSave(service: TestService, link: string) {
  const form = { "content-type": "application/x-www-form-urlencoded" };
  const pages = [
    await http(service, "GET", link),
    await http(service, "POST", link, { body: "category=marketing", headers: form }),
  ];
  return pages.map((page) => {
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    return [page.status, /<title>(.*)<\/title>/.exec(page.text)?.[1]];
  });
}

/**
 * Banners cannot be deleted; a store without the link's banner (one restored from before it was
 * made, under the same identity key) is what a deleted banner would be: the page it shows is the
 * inactive banner's, never a 500.
 */
describe("a preferences link whose banner the store does not hold", () => {
  const identityKey = randomBytes(32).toString("base64");

  it("shows the page that says the settings are no longer available, and saves nothing", async () => {
    const first = await startTestService({ gateway: true, identityKeys: [identityKey] });
    let link: string;
    let teamId: string;
    try {
      const banner = await bannerFixture(first, { configuration });
      teamId = banner.teamId;
      const logged = await postLog(first, aChoice(banner.publicId));
      link = new URL(logged.body.managePreferences).pathname;
    } finally {
      await first.close();
    }
    const other = await startTestService({ gateway: true, identityKeys: [identityKey] });
    try {
      expect(await visitAndSave(other, link)).toEqual([
        [404, "These privacy settings are no longer available"],
        [404, "Your choices were not saved – These privacy settings are no longer available"],
      ]);
      expect(await storedRows(other, teamId)).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

/**
 * Links are signed under a secret derived from the identity key (docs/banner-runtime.md):
 * rotating the key ends outstanding links, never with a 500. While the old key is listed, a link
 * made under it says it is no longer valid (the visitor altered nothing); once it is dropped, a
 * link still within its 30 minutes cannot be told from an altered one, and one past them (as every
 * such link is by the time the old key may go) says it has expired. Either way nothing is saved,
 * and a link altered under the rotation still gets the altered-link page.
 */
describe("a preferences link after the identity key rotated", () => {
  const k1 = randomBytes(32).toString("base64");
  const k2 = randomBytes(32).toString("base64");
  const clock = { skewMs: 0 };
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-link-rotation-"));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  const start = (identityKeys: string[]) =>
    startTestService({
      gateway: true,
      dataDir,
      identityKeys,
      clock: () => new Date(Date.now() + clock.skewMs),
    });

  it("says a link made before the rotation is no longer valid while the old key is listed, expired once past its time, and saves nothing", async () => {
    // One link made with no identity key (under the operator token's secret), one under k1.
    const links: string[] = [];
    let banner = { teamId: "", publicId: "" };
    for (const identityKeys of [[], [k1]]) {
      const before = await start(identityKeys);
      try {
        if (!banner.teamId) banner = await bannerFixture(before, { configuration });
        const logged = await postLog(before, aChoice(banner.publicId));
        const link = new URL(logged.body.managePreferences).pathname;
        expect((await http(before, "GET", link)).status).toBe(200);
        links.push(link);
      } finally {
        await before.close();
      }
    }
    const [madeWithoutKey = "", madeUnderK1 = ""] = links;
    const retired = [
      [403, "This link is no longer valid"],
      [403, "Your choices were not saved – This link is no longer valid"],
    ];
    const invalid = [
      [403, "This link is not valid"],
      [403, "Your choices were not saved – This link is not valid"],
    ];
    const expired = [
      [403, "This link has expired"],
      [403, "Your choices were not saved – This link has expired"],
    ];
    // The new key first, the old one still listed; then the old one dropped; then no key at all
    // (the operator token's secret again).
    const cases: [string[], string, unknown][] = [
      [[k2, k1], madeUnderK1, retired],
      [[k2, k1], madeWithoutKey, retired],
      [[k2, k1], alteredLink(madeUnderK1), invalid],
      [[k2], madeUnderK1, invalid],
      [[], madeUnderK1, invalid],
    ];
    for (const [identityKeys, link, pages] of cases) {
      const rotated = await start(identityKeys);
      try {
        const before = await storedRows(rotated, banner.teamId);
        expect([identityKeys, link, await visitAndSave(rotated, link)]).toEqual([
          identityKeys,
          link,
          pages,
        ]);
        expect(await storedRows(rotated, banner.teamId)).toHaveLength(before.length);
      } finally {
        await rotated.close();
      }
    }
    // Past its 30 minutes, a link made before the rotation has expired, as any link has, whether
    // the old key is still listed, dropped, or no key is left at all. Regression: once the old
    // key was dropped, it said the link was not valid, as if the visitor had altered it. A
    // link's expiry is written in whole seconds, rounded up: a second more than the 30 minutes.
    for (const identityKeys of [[k2, k1], [k2], []]) {
      const rotated = await start(identityKeys);
      clock.skewMs = PREFERENCES_LINK_TTL_MS + 1_000;
      try {
        const before = await storedRows(rotated, banner.teamId);
        expect([identityKeys, await visitAndSave(rotated, madeUnderK1)]).toEqual([
          identityKeys,
          expired,
        ]);
        expect(await storedRows(rotated, banner.teamId)).toHaveLength(before.length);
      } finally {
        clock.skewMs = 0;
        await rotated.close();
      }
    }
  });

  it("shows the retired link's page in the browser's language", async () => {
    const first = await start([k1]);
    let link: string;
    try {
      const { publicId } = await bannerFixture(first, { configuration });
      link = new URL((await postLog(first, aChoice(publicId))).body.managePreferences).pathname;
    } finally {
      await first.close();
    }
    const rotated = await start([k2, k1]);
    try {
      const page = await http(rotated, "GET", link, { headers: { "accept-language": "nl" } });
      expect(page.status).toBe(403);
      expect(page.text).toContain(
        "<main><h1>Deze link is niet meer geldig</h1>\n<p>Links die vóór een beveiligingsupdate van deze dienst zijn gemaakt, werken niet meer. Open de site opnieuw en maak je keuze opnieuw via de banner of de privacyinstellingen.</p></main>",
      );
    } finally {
      await rotated.close();
    }
  });
});
