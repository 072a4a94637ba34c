import { readFile } from "node:fs/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import {
  bulkyTexts,
  createBanner,
  createTeam,
  http,
  mintKey,
  operator,
} from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import { rawExchange } from "#test/support/raw-http1.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** spec 2.1, 4.2-4.3 and decisions §3 through REST. */
describe("banners", () => {
  let service: TestService;
  let key: string;
  const post = (body: unknown) => http(service, "POST", "/api/v1/banners", { key, body });

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    key = (await mintKey(service, await createTeam(service, "starter"))).key;
  });
  afterAll(() => service.close());

  it("creates a banner with the defaults of spec 2.1, a distinct publicId and revision 1", async () => {
    const result = await post({
      name: "Shop",
      domain: "Shop.Example.com",
      configuration: {},
      ccpaEnabled: true,
    });
    expect(result.status).toBe(201);
    const banner = result.body.data.banner;
    expect(banner).toMatchObject({
      name: "Shop",
      domain: "https://shop.example.com",
      isActive: true,
      compliance: { gdpr: true, ccpa: true, lgpd: false },
      revision: 1,
      hasUnpublishedChanges: false,
      configuration: {
        layout: "banner",
        position: "bottom",
        primaryColor: "#000000",
        secondaryColor: "#ffffff",
        textColor: "#333333",
        accentColor: "#007bff",
        telemetryLevel: "origin",
        additionalDomains: [],
      },
    });
    expect(banner.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(banner.publicId).toMatch(/^[0-9a-f-]{36}$/);
    expect(banner.publicId).not.toBe(banner.id);
    expect(new Date(banner.createdAt).toISOString()).toBe(banner.createdAt);
  });

  it("accepts the complete example of docs/banner-configuration.md and answers it back as written", async () => {
    const doc = await readFile(
      new URL("../../docs/banner-configuration.md", import.meta.url),
      "utf8",
    );
    const example = JSON.parse(/```json\n([\s\S]*?)```/.exec(doc)?.[1] ?? "null");
    const result = await post({ name: "Shop", domain: "shop.example.com", configuration: example });
    expect([result.status, result.body.error]).toEqual([201, undefined]);
    expect(result.body.data.banner.configuration).toMatchObject(example);
  });

  it("reads a banner id in either case, as a public id is", async () => {
    const { id } = await createBanner(service, key);
    const upper = id.toUpperCase();
    const read = await http(service, "GET", `/api/v1/banners/${upper}`, { key });
    expect([read.status, read.body.data.banner.id]).toEqual([200, id]);
    const edited = await http(service, "PATCH", `/api/v1/banners/${upper}`, {
      key,
      body: { name: "Renamed" },
    });
    expect([edited.status, edited.body.data.banner.name]).toEqual([200, "Renamed"]);
    const published = await http(service, "POST", `/api/v1/banners/${upper}/publish`, { key });
    expect(published.status).toBe(200);
  });

  it.each([
    ["example.com", "https://example.com"],
    ["http://example.com/", "https://example.com"],
    // decisions §5: a port other than the default is part of the site the log route accepts.
    ["https://www.example.co.uk:8443", "https://www.example.co.uk:8443"],
    ["http://example.com:8080", "https://example.com:8080"],
    ["https://example.com:443", "https://example.com"],
    ["localhost:3000", "https://localhost"],
    // spec 4.3's localhost: its loopback addresses too, keeping no port as localhost does.
    ["127.0.0.1:5173", "https://127.0.0.1"],
    ["http://[::1]:5173", "https://[::1]"],
    ["127.1", "https://127.0.0.1"],
    ["bücher.example", "https://xn--bcher-kva.example"],
  ])("normalizes the domain %s to %s", async (domain, normalized) => {
    const result = await post({ name: "D", domain, configuration: {} });
    expect(result.body.data.banner.domain).toBe(normalized);
  });

  it.each([
    "",
    "192.168.1.1",
    "10.0.0.1:5173",
    "127.0.0.2",
    "[2001:db8::1]",
    "http://127.0.0.1:0",
    "example",
    "https://example.com/path",
    "ftp://example.com",
    "exa mple.com",
    "-bad-.com",
    // Port 0 names no port: no page is ever served from it, so no choice could be logged.
    "example.com:0",
    "http://localhost:0",
  ])("refuses the domain %j", async (domain) => {
    const result = await post({ name: "D", domain, configuration: {} });
    expect(result.status).toBe(400);
    expect(result.body.data.details).toEqual([expect.objectContaining({ field: "domain" })]);
  });

  it("refuses an additional domain on port 0, which no page is served from", async () => {
    const result = await post({
      name: "D",
      domain: "shop.example.com",
      configuration: { additionalDomains: ["partner.example.com:0"] },
    });
    expect(result.status).toBe(400);
    expect(result.body.data.details).toEqual([
      {
        field: "configuration.additionalDomains[0]",
        message: "configuration.additionalDomains[0] must be a valid domain or localhost",
      },
    ]);
  });

  it("refuses a public suffix as the domain or an additional domain, with one message", async () => {
    for (const domain of ["co.uk", "https://github.io"]) {
      const result = await post({ name: "D", domain, configuration: {} });
      expect(result.status).toBe(400);
      expect(result.body.data.details).toEqual([
        {
          field: "domain",
          message:
            "domain must be a domain a site owns, not a public suffix such as co.uk or github.io",
        },
      ]);
    }
    const additional = await post({
      name: "D",
      domain: "shop.example.co.uk",
      configuration: { additionalDomains: ["partner.example.com", "co.uk", "myshop.github.io"] },
    });
    expect(additional.status).toBe(400);
    expect(additional.body.data.details).toEqual([
      expect.objectContaining({ field: "configuration.additionalDomains[1]" }),
    ]);
    const fine = await post({
      name: "D",
      domain: "shop.example.co.uk",
      configuration: { additionalDomains: ["myshop.github.io", "localhost"] },
    });
    expect(fine.status).toBe(201);
  });

  it.each([
    "#abc",
    "#abcd",
    "#a1b2c3",
    "#a1b2c3d4",
    "rgb(1, 2, 3)",
    "rgba(1,2,3,0.5)",
    "hsl(120 50% 50%)",
    "hsla(120, 50%, 50%, .3)",
    "rgb(10% 20% 30%)",
    "rgb(1 2 3 / 50%)",
    "hsl(0.5turn 40% 40% / 0.5)",
    "hsl(120deg, 50%, 50%)",
    "hsl(120 50 50)",
    "rgb(none 2 3)",
    "RebeccaPurple",
    "transparent",
  ])("accepts the colour %s", async (color) => {
    expect(
      (await post({ name: "C", domain: "c.example", configuration: { accentColor: color } }))
        .status,
    ).toBe(201);
  });

  it.each([
    "#abcde",
    "red;background:url(x)",
    "rgb(var(--x), 0, 0)",
    "expression(alert(1))",
    "notacolour",
    "rgb(1,2)",
    "hsl(1,2,3)",
    "rgb(1, 2 3)",
    "rgb(1%, 2, 3)",
    "rgb(1deg 2 3)",
    "hsl(120, 50%, 50% / 0.5)",
    "rgb(1 2 3, 0.5)",
    "rgb(1.,2,3)",
    "rgb(1 2 3 / 1.)",
    "rgb(1\u00a02 3)",
    "hsl(1\u3000 2% 3%)",
  ])("refuses the colour %j", (color) => refusesColor(color));

  it("refuses a colour longer than 100 characters before any pattern runs, however well formed", () =>
    refusesColor(`rgb(${"1".repeat(10_000)}, 2, 3)`));

  async function refusesColor(color: string) {
    const result = await post({
      name: "C",
      domain: "c.example",
      configuration: { primaryColor: color },
    });
    expect([result.status, result.body.data.details[0].field]).toEqual([
      400,
      "configuration.primaryColor",
    ]);
  }

  it("refuses unknown fields and names them, without a code (spec 7)", async () => {
    const result = await post({
      name: "U",
      domain: "u.example",
      configuration: { layout: "popup", primaryColour: "#fff" },
      extra: 1,
    });
    expect(result.status).toBe(400);
    expect(result.body.data.code).toBeUndefined();
    expect(result.body.data.details.map((d: { field: string }) => d.field).sort()).toEqual([
      "configuration.layout",
      "configuration.primaryColour",
      "extra",
    ]);
  });

  it("keeps the privacy policy link's text and the always-on note per language, within their limits", async () => {
    const de = {
      privacyPolicyUrl: "https://u.example/datenschutz",
      privacyPolicyLabel: "Datenschutz",
      alwaysOnLabel: "Immer aktiv",
    };
    const created = await post({
      name: "P",
      domain: "u.example",
      configuration: { texts: { de } },
    });
    expect(created.status).toBe(201);
    expect(created.body.data.banner.configuration.texts.de).toMatchObject(de);
    const long = await post({
      name: "P",
      domain: "u.example",
      configuration: {
        texts: { de: { privacyPolicyLabel: "x".repeat(101), alwaysOnLabel: "x".repeat(51) } },
      },
    });
    expect(long.body.data.details).toEqual([
      {
        field: "configuration.texts.de.privacyPolicyLabel",
        message: "configuration.texts.de.privacyPolicyLabel must be at most 100 characters",
      },
      {
        field: "configuration.texts.de.alwaysOnLabel",
        message: "configuration.texts.de.alwaysOnLabel must be at most 50 characters",
      },
    ]);
  });

  it("holds the privacy policy URL to the text rules: characters counted, no unpaired surrogate, no control or invisible format character", async () => {
    const texts = (privacyPolicyUrl: string) => ({ texts: { de: { privacyPolicyUrl } } });
    const field = "configuration.texts.de.privacyPolicyUrl";
    for (const [url, rule] of [
      ["https://u.example/\ud800", "must be valid Unicode (it holds an unpaired surrogate)"],
      [`https://u.example/${"x".repeat(1983)}`, "must be at most 2000 characters"],
      ["ftp://u.example/", "must be an http(s) URL"],
      // Addresses a link would run or render rather than open (the page and the banner's link).
      ["javascript:alert(document.domain)", "must be an http(s) URL"],
      ["JavaScript://u.example/%0aalert(1)", "must be an http(s) URL"],
      ["data:text/html,<script>alert(1)</script>", "must be an http(s) URL"],
      ["https://u.example/\u0000", "must be an http(s) URL"],
      ["https://u.example/a\u007fb", "must be an http(s) URL"],
      ["https://u.example/\u0085", "must be an http(s) URL"],
      ["https://u.example/\u202etxt.exe", "must be an http(s) URL"],
      ["https://u.example/a\u200bb", "must be an http(s) URL"],
    ] as const) {
      const refused = await post({ name: "P", domain: "u.example", configuration: texts(url) });
      expect([refused.status, refused.body.data]).toEqual([
        400,
        {
          error: `Validation failed: ${field} ${rule}`,
          details: [{ field, message: `${field} ${rule}` }],
        },
      ]);
    }
    // 2000 characters, counted as code points: an emoji is one.
    const url = `https://u.example/${"\u{1F600}".repeat(1982)}`;
    const kept = await post({ name: "P", domain: "u.example", configuration: texts(url) });
    expect([kept.status, kept.body.data.banner?.configuration.texts.de.privacyPolicyUrl]).toEqual([
      201,
      url,
    ]);
  });

  it("stores each language under its canonical tag and refuses two keys naming one language", async () => {
    const { id, banner } = await createBanner(service, key, {
      configuration: { texts: { EN: { title: "Hello" }, "pt-br": { title: "Olá" }, de: {} } },
    });
    expect(Object.keys(banner.configuration.texts)).toEqual(["en", "pt-BR", "de"]);
    expect(banner.configuration.texts.en.title).toBe("Hello");
    const patched = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { texts: { "ZH-hant-tw": {}, fr: {} } } },
    });
    expect(Object.keys(patched.body.data.banner.configuration.texts)).toEqual(["zh-Hant-TW", "fr"]);
    const field = "configuration.texts";
    for (const [texts, message] of [
      [{ en: {}, EN: {} }, `${field} must not repeat a language: en and EN are both en`],
      [
        { "pt-BR": {}, "pt-br": {} },
        `${field} must not repeat a language: pt-BR and pt-br are both pt-BR`,
      ],
      [{ "en-a": {} }, `${field} keys must be a language tag such as en or pt-BR`],
      [
        { "yue-Hant-419-abcdefgh": {} },
        `${field} keys must be a language tag of at most 20 characters (a consent state's languageCode)`,
      ],
    ] as const) {
      for (const refused of [
        await post({ name: "L", domain: "u.example", configuration: { texts } }),
        await http(service, "PATCH", `/api/v1/banners/${id}`, {
          key,
          body: { configuration: { texts } },
        }),
      ]) {
        expect([refused.status, refused.body.data]).toEqual([
          400,
          { error: `Validation failed: ${message}`, details: [{ field, message }] },
        ]);
      }
    }
  });

  it("refuses repeated services, category names differing only in case, __proto__ and texts for no category", async () => {
    const category = (name: string, services: string[] = []) => ({ name, services });
    const refusals = [
      [
        { categories: [category("necessary"), category("analytics", ["ga", "hotjar", "ga"])] },
        "configuration.categories[1].services",
        "must not repeat a service: ga",
      ],
      [
        { categories: [category("analytics"), category("Analytics")] },
        "configuration.categories",
        "must not repeat a category name: analytics and Analytics differ only in case",
      ],
      [
        { categories: [category("analytics"), category("analytics")] },
        "configuration.categories",
        "must not repeat a category name: analytics",
      ],
      [{ categories: [] }, "configuration.categories", "must have at least 1 entry"],
      // spec 8: at most 50, the most a consent state names.
      [
        { categories: Array.from({ length: 51 }, (_, i) => category(`c${i}`)) },
        "configuration.categories",
        "must have at most 50 entries",
      ],
      // All accepted, the names must fit the visitor's consent cookie (4 KB), or a choice would
      // be logged but never kept and the banner would ask on every page: 50 names of 90
      // characters are 4,953 bytes as the cookie holds them.
      [
        {
          categories: Array.from({ length: 50 }, (_, i) => category(`c${i}_`.padEnd(90, "x"))),
        },
        "configuration.categories",
        "must have names that together fit a visitor's consent cookie: 4953 bytes URL-encoded, at most 3000 (use fewer or shorter names)",
      ],
      // A visitor's state names the services it accepts (spec 2.4): PUT state and the log route
      // refuse a control character in them, so a choice naming this one could not be kept.
      [
        { categories: [category("necessary"), category("analytics", ["Matomo\tCloud"])] },
        "configuration.categories[1].services[0]",
        "must not contain control characters",
      ],
      // The services, all accepted, go into the cookie beside the names: 5 categories of 40
      // services of 20 characters are 6,366 bytes as the cookie holds them.
      [
        {
          categories: Array.from({ length: 5 }, (_, i) =>
            category(
              `c${i}`,
              Array.from({ length: 40 }, (_, j) => `Service ${i}-${j}`.padEnd(20, "x")),
            ),
          ),
        },
        "configuration.categories",
        "must have names that together fit a visitor's consent cookie: 6366 bytes URL-encoded, at most 3000 (use fewer or shorter names)",
      ],
      // A visitor's choice is keyed by category name, and no body may carry a __proto__ key.
      [
        { categories: [category("necessary"), category("__proto__")] },
        "configuration.categories[1].name",
        "must not be __proto__, a key JSON bodies may not carry",
      ],
      [
        { texts: { de: { categories: { marketin: { label: "Werbung" }, analytics: {} } } } },
        "configuration.texts.de.categories",
        "names no category of the banner: marketin",
      ],
      [
        {
          categories: [category("necessary"), category("stats")],
          texts: { fr: { categories: { analytics: { label: "Statistiques" } } } },
        },
        "configuration.texts.fr.categories",
        "names no category of the banner: analytics",
      ],
    ] as const;
    const { id, banner: created } = await createBanner(service, key);
    const listed = async () => (await http(service, "GET", "/api/v1/banners", { key })).body.data;
    const before = await listed();
    for (const [configuration, field, rule] of refusals) {
      const message = `${field} ${rule}`;
      for (const refused of [
        await post({ name: "C", domain: "c.example", configuration }),
        await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { configuration } }),
      ]) {
        expect([refused.status, refused.body.data]).toEqual([
          400,
          { error: `Validation failed: ${message}`, details: [{ field, message }] },
        ]);
      }
    }
    // Nothing refused was stored: no new banner, and the edited one exactly as created.
    expect(await listed()).toEqual(before);
    const fifty = Array.from({ length: 50 }, (_, i) => category(`c${i}`));
    const most = await post({
      name: "C",
      domain: "c.example",
      configuration: { categories: fifty },
    });
    expect(most.status).toBe(201);
    expect(most.body.data.banner.configuration.categories).toHaveLength(50);
    const unchanged = await http(service, "GET", `/api/v1/banners/${id}`, { key });
    expect(unchanged.body.data.banner).toEqual(created);

    // Texts name the categories sent beside them, or else the banner's own; texts stored earlier
    // are kept when a later PATCH changes only the categories.
    const renamed = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: {
        configuration: {
          categories: [category("necessary"), category("stats", ["matomo"])],
          texts: { fr: { categories: { stats: { label: "Statistiques" } } } },
        },
      },
    });
    expect(renamed.status).toBe(200);
    const narrowed = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { categories: [category("necessary")] } },
    });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.data.banner.configuration.texts.fr.categories).toEqual({
      stats: { label: "Statistiques", description: "" },
    });
    // The configuration as read back (texts for a category since removed included), or the whole
    // Banner shape, can be sent back as it is: read-modify-write works.
    const { banner } = narrowed.body.data;
    for (const body of [{ configuration: banner.configuration }, banner]) {
      const sentBack = await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body });
      expect([sentBack.status, sentBack.body.data.banner?.configuration]).toEqual([
        200,
        banner.configuration,
      ]);
    }
    // A name differing from a category only in case is pointed out.
    const cased = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { texts: { fr: { categories: { Necessary: {} } } } } },
    });
    expect(cased.body.data.details).toEqual([
      {
        field: "configuration.texts.fr.categories",
        message:
          "configuration.texts.fr.categories names no category of the banner: Necessary (the category is necessary)",
      },
    ]);
  });

  it("takes a compliance flag sent twice in a PATCH only when both spellings agree", async () => {
    const { id } = await createBanner(service, key);
    const patch = (body: unknown) => http(service, "PATCH", `/api/v1/banners/${id}`, { key, body });
    const refused = await patch({ ccpaEnabled: true, compliance: { ccpa: false, gdpr: true } });
    const message = "compliance.ccpa must equal ccpaEnabled when both are sent";
    expect([refused.status, refused.body.data]).toEqual([
      400,
      { error: `Validation failed: ${message}`, details: [{ field: "compliance.ccpa", message }] },
    ]);
    const agreed = await patch({ ccpaEnabled: true, compliance: { ccpa: true, lgpd: true } });
    expect([agreed.status, agreed.body.data.banner.compliance]).toEqual([
      200,
      { gdpr: true, ccpa: true, lgpd: true },
    ]);
  });

  it("lists every violation in one answer: a failed field does not hide the checks across a list or a body", async () => {
    const fieldsOf = (refused: { status: number; body: { data: { details: unknown[] } } }) => [
      refused.status,
      refused.body.data.details,
    ];
    const created = await post({
      name: "A",
      domain: "a.example",
      configuration: {
        categories: [
          { name: "analytics", services: ["ga", "x".repeat(101), "ga"] },
          { name: "Analytics" },
          { name: "not a name" },
        ],
        jurisdictionRules: [
          { id: "eu", mode: "opt_in" },
          { id: "eu", mode: "opt_out" },
          { id: "us", mode: "sometimes" },
        ],
      },
    });
    expect(fieldsOf(created)).toEqual([
      400,
      expect.arrayContaining([
        expect.objectContaining({ field: "configuration.categories[0].services[1]" }),
        {
          field: "configuration.categories[0].services",
          message: "configuration.categories[0].services must not repeat a service: ga",
        },
        expect.objectContaining({ field: "configuration.categories[2].name" }),
        {
          field: "configuration.categories",
          message:
            "configuration.categories must not repeat a category name: analytics and Analytics differ only in case",
        },
        expect.objectContaining({ field: "configuration.jurisdictionRules[2].mode" }),
        {
          field: "configuration.jurisdictionRules",
          message: "configuration.jurisdictionRules must not repeat a rule id",
        },
      ]),
    ]);
    expect(created.body.data.details).toHaveLength(6);

    const { id } = await createBanner(service, key);
    const patched = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { name: " ", ccpaEnabled: true, compliance: { ccpa: false, gdpr: "yes" } },
    });
    expect(fieldsOf(patched)).toEqual([
      400,
      expect.arrayContaining([
        { field: "name", message: "name must not be blank" },
        expect.objectContaining({ field: "compliance.gdpr" }),
        {
          field: "compliance.ccpa",
          message: "compliance.ccpa must equal ccpaEnabled when both are sent",
        },
      ]),
    ]);
    expect(patched.body.data.details).toHaveLength(3);
  });

  it("refuses jurisdiction rules that could never match: unassigned countries, repeats, regions outside the rule's countries", async () => {
    const rulesOf = (jurisdictionRules: unknown[]) =>
      http(service, "POST", "/api/v1/banners", {
        key,
        body: { name: "Geo", domain: "geo.example", configuration: { jurisdictionRules } },
      });
    const refused = await rulesOf([
      // FR-75 lies outside DE, but with UK and XX refused that is not said as well.
      { id: "eu", countries: ["DE", "UK", "XX", "DE"], regions: ["FR-75"], mode: "opt_in" },
      {
        id: "us",
        countries: ["US"],
        regions: ["US-CA", "DE-BY", "ZZ-1", "US-CA"],
        mode: "opt_out",
      },
    ]);
    const country =
      "must be an assigned ISO 3166-1 alpha-2 code such as DE (the United Kingdom is GB)";
    const at = (field: string, message: string) => ({ field, message: `${field} ${message}` });
    expect(refused.status).toBe(400);
    expect(refused.body.data.details).toEqual([
      at("configuration.jurisdictionRules[0].countries[1]", country),
      at("configuration.jurisdictionRules[0].countries[2]", country),
      at("configuration.jurisdictionRules[0].countries", "must not repeat a country: DE"),
      at(
        "configuration.jurisdictionRules[1].regions[2]",
        "must be an ISO 3166-2 code of an assigned country, such as US-CA",
      ),
      at("configuration.jurisdictionRules[1].regions", "must not repeat a region: US-CA"),
      at(
        "configuration.jurisdictionRules[1].regions[1]",
        "must lie in one of the rule's countries (US), or the rule never matches there",
      ),
    ]);
    const accepted = await rulesOf([
      { id: "ca", regions: ["US-CA"], mode: "opt_in" },
      { id: "us", countries: ["US"], regions: ["US-VA", "US-CO"], mode: "opt_out" },
      { id: "eea", countries: ["DE", "FR", "GB", "XK"], mode: "opt_in" },
    ]);
    expect(accepted.status).toBe(201);
  });

  it("refuses a body that is not UTF-8 as invalid JSON, without a code; a UTF-8 BOM is read past", async () => {
    const send = (method: string, path: string, body: Buffer) =>
      http(service, method, path, { key, body });
    const nameOf = (bytes: number[]) =>
      Buffer.concat([Buffer.from('{"name":"'), Buffer.from(bytes), Buffer.from('"}')]);
    const { id } = await createBanner(service, key);
    const error = "Request body is not valid JSON";
    for (const [method, path] of [
      ["POST", "/api/v1/banners"],
      ["PATCH", `/api/v1/banners/${id}`],
    ] as const) {
      const refused = await send(method, path, nameOf([0x53, 0x68, 0x6f, 0x70, 0xff]));
      expect([method, refused.status, refused.body]).toEqual([
        method,
        400,
        {
          data: { error, details: [{ message: "The request body is not valid JSON" }] },
          version: "v1",
        },
      ]);
    }
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const renamed = await send(
      "PATCH",
      `/api/v1/banners/${id}`,
      Buffer.concat([bom, nameOf([0x53, 0xc3, 0xbf])]),
    );
    expect([renamed.status, renamed.body.data.banner.name]).toEqual([200, "S\u00ff"]);
  });

  it("lands concurrent edits of one banner: a lost race is retried after a random wait", async () => {
    const { id } = await createBanner(service, key);
    const names = Array.from({ length: 12 }, (_, i) => `Edit ${i}`);
    const results = await Promise.all(
      names.map((name) => http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { name } })),
    );
    expect(results.map((r) => r.status)).toEqual(names.map(() => 200));
    const stored = await http(service, "GET", `/api/v1/banners/${id}`, { key });
    expect(names).toContain(stored.body.data.banner.name);
  });

  it("edits the draft with PATCH and makes it live with publish, bumping the revision", async () => {
    const { id, publicId } = await createBanner(service, key, {
      configuration: { layout: "modal" },
    });
    const patched = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: {
        name: "Renamed",
        configuration: {
          position: "top",
          categories: [{ name: "necessary", required: true }, { name: "stats" }],
        },
      },
    });
    expect(patched.body.data.banner).toMatchObject({
      name: "Renamed",
      revision: 1,
      hasUnpublishedChanges: true,
    });
    expect(patched.body.data.banner.configuration).toMatchObject({
      layout: "modal",
      position: "top",
    });

    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const before = await banners.getPublishedBanner({ publicId });
    expect([before.banner?.revision, before.banner?.configuration?.position]).toEqual([
      1,
      "bottom",
    ]);

    const published = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    expect(published.body.data.banner).toMatchObject({ revision: 2, hasUnpublishedChanges: false });
    const after = await banners.getPublishedBanner({ publicId });
    expect([after.banner?.revision, after.banner?.configuration?.position]).toEqual([2, "top"]);
    expect(after.banner?.configuration?.categories.map((c) => c.name)).toEqual([
      "necessary",
      "stats",
    ]);
  });

  // spec 2.4 and 8: a consent state's revision is 0-1,000,000, so a banner is published up to it.
  it("publishes up to revision 1,000,000, which a choice can still be logged against, and no further", async () => {
    const { id, publicId } = await createBanner(service, key);
    const stored = await service.store.banners.getByPublicId(publicId);
    if (!stored) throw new Error("the created banner is not stored");
    const production = { ...stored.production, revision: 999_999 };
    expect(
      await service.store.banners.replace(
        { ...stored, production, version: stored.version + 1 },
        stored.version,
      ),
    ).toBe(true);

    const last = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    expect([last.status, last.body.data.banner?.revision]).toEqual([200, 1_000_000]);
    const logged = await postLog(service, aChoice(publicId, { revision: 1_000_000 }));
    expect(logged.status).toBe(200);

    const beyond = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    expect([beyond.status, beyond.body.data.code, beyond.body.version]).toEqual([
      409,
      "failed_precondition",
      "v1",
    ]);
    expect(beyond.body.data.error).toMatch(/revision 1000000.*create a new banner/);
    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const published = await banners.getPublishedBanner({ publicId });
    expect(published.banner?.revision).toBe(1_000_000);
  });

  // decisions §3: GET and PATCH /api/v1/banners/{id}, POST /api/v1/banners/{id}/publish; "Other
  // methods on these paths: 405 with an `Allow` header" (HEAD answers with GET).
  it("answers other methods on a banner and its publish path with 405 and Allow", async () => {
    const { id } = await createBanner(service, key);
    for (const [path, allow] of [
      [`/api/v1/banners/${id}`, "GET, PATCH, HEAD"],
      [`/api/v1/banners/${id}/publish`, "POST"],
    ] as const) {
      for (const method of ["DELETE", "PUT"]) {
        const result = await http(service, method, path, { key, body: {} });
        expect([
          method,
          path,
          result.status,
          result.headers.get("allow"),
          result.body.data.code,
          result.body.version,
        ]).toEqual([method, path, 405, allow, "method_not_allowed", "v1"]);
      }
    }
    // What Allow names is served, and the refused methods changed nothing.
    const head = await http(service, "HEAD", `/api/v1/banners/${id}`, { key });
    const read = await http(service, "GET", `/api/v1/banners/${id}`, { key });
    expect([head.status, read.status, read.body.data.banner.revision]).toEqual([200, 200, 1]);
  });

  it("lists the team's banners oldest first and hides a deactivated one from the public side only", async () => {
    const own = await createBanner(service, key, { name: "To deactivate" });
    await http(service, "PATCH", `/api/v1/banners/${own.id}`, { key, body: { isActive: false } });
    const list = await http(service, "GET", "/api/v1/banners", { key });
    const names = list.body.data.banners.map((b: { name: string }) => b.name);
    expect(names[0]).toBe("Shop");
    expect(list.body.data.banners.find((b: { id: string }) => b.id === own.id).isActive).toBe(
      false,
    );
    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    await expect(banners.getPublishedBanner({ publicId: own.publicId })).rejects.toThrow(
      /No active banner/,
    );
  });

  it("reads a path with a trailing slash as the path without it", async () => {
    const own = await createBanner(service, key, { name: "Slashed" });
    const list = await http(service, "GET", "/api/v1/banners/", { key });
    expect(list.status).toBe(200);
    expect(list.body.data.banners.map((b: { id: string }) => b.id)).toContain(own.id);
    const one = await http(service, "GET", `/api/v1/banners/${own.id}/`, { key });
    expect([one.status, one.body.data.banner.name]).toEqual([200, "Slashed"]);
    const listed = await http(service, "GET", "/api/v1/banners/?limit=1", { key });
    expect(listed.status).toBe(200);
    // Outside the versioned API a path answers only at its exact address.
    expect((await http(service, "GET", `/loader/${own.publicId}.js`)).status).toBe(200);
    expect((await http(service, "GET", `/loader/${own.publicId}.js/`)).status).toBe(404);
    const unknown = await http(service, "GET", "/api/v1/nothing/", { key });
    expect([unknown.status, unknown.body.data.code, unknown.body.version]).toEqual([
      404,
      "not_found",
      "v1",
    ]);
  });

  it("reads a request target in absolute-form as its path and query (RFC 9112 3.2.2)", async () => {
    const own = await createBanner(service, key, { name: "Absolute" });
    const port = Number(new URL(service.gatewayUrl).port);
    const exchange = (target: string, headers = "") =>
      rawExchange(port, (write) =>
        write(`GET ${target} HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n`),
      );
    const auth = `Authorization: Bearer ${key}\r\n`;
    // The trailing slash is ignored as in origin-form: the list, not a banner with an empty id.
    const list = await exchange("http://api.example/api/v1/banners/?limit=5", auth);
    expect(list.status).toBe(200);
    expect(JSON.parse(list.body).data.banners.map((b: { id: string }) => b.id)).toContain(own.id);
    const one = await exchange(`HTTP://api.example:8080/api/v1/banners/${own.id}/`, auth);
    expect([one.status, JSON.parse(one.body).data.banner.name]).toEqual([200, "Absolute"]);
    // A v1 path the router cannot read: the envelope, naming the path the client meant.
    const unreadable = await exchange("http://api.example/api/v1/banners/%zz");
    expect(unreadable.headers).toContain("api-version: v1");
    expect([unreadable.status, JSON.parse(unreadable.body)]).toEqual([
      404,
      {
        data: { error: "No endpoint at GET /api/v1/banners/%zz", code: "not_found" },
        version: "v1",
      },
    ]);
    // A preferences link altered past its token: the page for an altered link, not JSON.
    const altered = await exchange("http://api.example/preferences/token/extra");
    expect([altered.status, altered.headers]).toEqual([
      403,
      expect.stringContaining("content-type: text/html"),
    ]);
    // Outside the versioned API the plain 404 names the path alone.
    const unknown = await exchange("http://api.example/nothing?x=1");
    expect([unknown.status, JSON.parse(unknown.body)]).toEqual([
      404,
      { error: "No endpoint at GET /nothing", code: "not_found" },
    ]);
  });

  it("treats an empty body as invalid JSON and ignores read-only fields sent back in a PATCH", async () => {
    const empty = await http(service, "POST", "/api/v1/banners", { key });
    expect([empty.status, empty.body.data.error]).toEqual([400, "Request body is not valid JSON"]);
    const { banner } = await createBanner(service, key);
    const roundTrip = await http(service, "PATCH", `/api/v1/banners/${banner.id}`, {
      key,
      body: { ...banner, name: "Round trip" },
    });
    expect([roundTrip.status, roundTrip.body.data.banner.name]).toEqual([200, "Round trip"]);
  });

  it("refuses names people read that are blank to the eye or hold control characters: banners, teams, keys", async () => {
    const blank = "\u200b \u2060\u3164\u2800";
    const withEscape = "Shop\u001b[2J";
    for (const [name, message] of [
      [blank, "name must not be blank"],
      [withEscape, "name must not contain control characters"],
    ]) {
      const refused = await post({ name, domain: "names.example", configuration: {} });
      expect([refused.status, refused.body.data.details]).toEqual([
        400,
        [{ field: "name", message }],
      ]);
    }
    const { admin, auth } = operator(service);
    const teamId = await createTeam(service, "starter");
    for (const call of [
      admin.createTeam({ name: blank, plan: "starter" }, auth),
      admin.createTeam({ name: withEscape, plan: "starter" }, auth),
      admin.createApiKey(
        { teamId, environment: "live", scopes: ["banners:read"], name: withEscape },
        auth,
      ),
    ]) {
      const error = await call.then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(error?.code).toBe(Code.InvalidArgument);
    }
    // A key's name stays optional, and names in any script are names.
    const unnamed = await admin.createApiKey(
      { teamId, environment: "live", scopes: ["banners:read"], name: "" },
      auth,
    );
    expect(unnamed.apiKey?.name).toBe("");
    const named = { name: "Boutique Élodie 東京", domain: "names.example", configuration: {} };
    expect((await post(named)).status).toBe(201);
  });

  it("writes nothing for a PATCH that changes nothing: updatedAt tells the last change", async () => {
    const { id, banner } = await createBanner(service, key);
    const patch = (body: unknown) => http(service, "PATCH", `/api/v1/banners/${id}`, { key, body });
    for (const body of [
      {},
      { name: banner.name, configuration: { layout: banner.configuration.layout } },
      banner,
    ]) {
      const answer = await patch(body);
      expect([answer.status, answer.body.data.banner]).toEqual([200, banner]);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
    const renamed = await patch({ name: "Changed" });
    expect(renamed.body.data.banner.updatedAt > banner.updatedAt).toBe(true);
  });

  it("keeps a configuration within what one body can carry, though each PATCH is within the limit", async () => {
    const { id } = await createBanner(service, key);
    const patch = (body: unknown) => http(service, "PATCH", `/api/v1/banners/${id}`, { key, body });
    const first = await patch({ configuration: { texts: bulkyTexts() } });
    expect(first.status).toBe(200);
    // A PATCH replaces the fields it names: categories next to the texts stored before.
    const categories = Array.from({ length: 50 }, (_, c) => ({
      name: c === 0 ? "necessary" : `category-${c}`,
      description: `${c} `.padEnd(1000, "d"),
    }));
    const refused = await patch({ configuration: { categories } });
    expect([refused.status, refused.body.data.code, refused.body.data.details]).toEqual([
      400,
      undefined,
      [
        {
          field: "configuration",
          message: expect.stringMatching(
            /^configuration must be at most 248 KB as JSON, so that the banner can be sent back whole; with this change it would be \d+ KB$/,
          ),
        },
      ],
    ]);
    // Nothing was stored, and the banner as read goes back in one PATCH.
    const { banner } = (await http(service, "GET", `/api/v1/banners/${id}`, { key })).body.data;
    expect(Object.keys(banner.configuration.texts)).toHaveLength(100);
    const sentBack = await patch(banner);
    expect(sentBack.status).toBe(200);
  });

  it("lists every banner of a team however large the list grows (spec 4.2: no pages)", async () => {
    const own = (await mintKey(service, await createTeam(service, "enterprise"))).key;
    // 96 banners of about 200 KB each: a list answer past 16 MiB however it is encoded.
    const texts = bulkyTexts();
    for (let batch = 0; batch < 12; batch++) {
      const made = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          http(service, "POST", "/api/v1/banners", {
            key: own,
            body: { name: `Big ${batch * 8 + i}`, domain: "big.example", configuration: { texts } },
          }),
        ),
      );
      expect(made.map((answer) => answer.status)).toEqual(Array(8).fill(201));
    }
    const listed = await http(service, "GET", "/api/v1/banners", { key: own });
    expect(listed.status).toBe(200);
    expect(listed.text.length).toBeGreaterThan(19 * 1024 * 1024);
    expect(listed.body.data.banners).toHaveLength(96);
  });
});
