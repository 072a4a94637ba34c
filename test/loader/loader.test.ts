import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http, rawHttp } from "#test/support/api.js";
import { bannerFixture, headerRecord } from "#test/support/consent-log.js";
import {
  configOf,
  loader,
  jurisdictionRules as rules,
  startGeoService,
} from "#test/support/loader.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** decisions §6: GET /loader/{publicId}.js over real HTTP. */
describe("GET /loader/{publicId}.js", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startGeoService();
  });
  afterAll(() => service.close());

  it("serves the runtime with the production configuration, cacheable", async () => {
    const { publicId } = await bannerFixture(service, { configuration: { layout: "modal" } });
    const result = await loader(service, publicId);
    expect(result.status).toBe(200);
    expect(headerRecord(result.headers)).toMatchObject({
      "content-type": "text/javascript; charset=utf-8",
      "cache-control": "public, max-age=300, stale-while-revalidate=60",
      etag: expect.stringMatching(/^"[A-Za-z0-9_-]{27}"$/),
      vary: "Accept-Encoding",
      "access-control-allow-origin": "*",
    });
    expect(configOf(result.bytes)).toMatchObject({ id: publicId, revision: 1, layout: "modal" });
    expect(result.bytes.toString()).not.toMatch(/\beval\(|new Function/);
  });

  it("gives each category its services, and none to a category without, with the texts' label for them", async () => {
    const categories = [
      { name: "necessary", required: true, label: "Necessary", services: ["Shop session"] },
      { name: "marketing", label: "Marketing", services: ["Google Ads", "Meta Pixel"] },
      { name: "social", label: "Social", services: [] },
    ];
    const texts = { de: { servicesLabel: "Dienste" }, fr: { title: "Vos choix" } };
    const { publicId } = await bannerFixture(service, { configuration: { categories, texts } });
    const config = configOf((await loader(service, publicId)).bytes);
    expect(config.categories).toEqual([
      {
        name: "necessary",
        required: true,
        label: "Necessary",
        description: "",
        services: ["Shop session"],
      },
      {
        name: "marketing",
        required: false,
        label: "Marketing",
        description: "",
        services: ["Google Ads", "Meta Pixel"],
      },
      { name: "social", required: false, label: "Social", description: "" },
    ]);
    expect(config.texts).toEqual({ de: { servicesLabel: "Dienste" }, fr: { title: "Vos choix" } });
  });

  it("compresses with brotli or gzip as Accept-Encoding allows, each with its own ETag", async () => {
    const { publicId } = await bannerFixture(service);
    const plain = await loader(service, publicId);
    const br = await loader(service, publicId, { "accept-encoding": "gzip, deflate, br" });
    const gz = await loader(service, publicId, { "accept-encoding": "br;q=0, gzip" });
    expect(br.headers.get("content-encoding")).toBe("br");
    expect(gz.headers.get("content-encoding")).toBe("gzip");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(brotliDecompressSync(br.bytes)).toEqual(plain.bytes);
    expect(gunzipSync(gz.bytes)).toEqual(plain.bytes);
    const etags = new Set([plain, br, gz].map((r) => r.headers.get("etag")));
    expect(etags.size).toBe(3);
  });

  it("follows the client's q-values, ours best first among equals", async () => {
    const { publicId } = await bannerFixture(service);
    const cases: [string, string | null][] = [
      ["gzip, br", "br"],
      ["br;q=0.5, gzip", "gzip"],
      ["*", "br"],
      ["*;q=0.1, gzip;q=0.2", "gzip"],
      ["identity;q=0", null],
      ["deflate", null],
      // RFC 9110 §8.4.1.3: x-gzip is gzip.
      ["x-gzip", "gzip"],
      ["X-GZIP;q=0.8, identity;q=0.1", "gzip"],
    ];
    for (const [accept, expected] of cases) {
      const result = await loader(service, publicId, { "accept-encoding": accept });
      expect([accept, result.status, result.headers.get("content-encoding")]).toEqual([
        accept,
        200,
        expected,
      ]);
    }
  });

  it("answers 405 with Allow to other methods, and 404 to an address the router cannot read", async () => {
    const { publicId } = await bannerFixture(service);
    for (const method of ["POST", "PUT", "DELETE", "OPTIONS", "TRACE"]) {
      const result = await rawHttp(service, method, `/loader/${publicId}.js`);
      expect([method, result.status, result.headers.get("allow")]).toEqual([
        method,
        405,
        "GET, HEAD",
      ]);
      expect(JSON.parse(result.text)).toMatchObject({ code: "method_not_allowed" });
    }
    for (const path of ["/loader/%zz.js", `/loader/${"a".repeat(120)}.js`]) {
      const result = await rawHttp(service, "GET", path);
      expect([path, result.status]).toEqual([path, 404]);
      expect(JSON.parse(result.text)).toMatchObject({ code: "not_found" });
      expect(result.headers.get("api-version")).toBeNull();
    }
  });

  it("answers 304 to a matching If-None-Match, 200 to a stale one", async () => {
    const { publicId } = await bannerFixture(service);
    // gzip's strong tag, sent back in its weak form; brotli's own is weak (loader-brotli.test.ts).
    const first = await loader(service, publicId, { "accept-encoding": "gzip" });
    const etag = first.headers.get("etag") ?? "";
    const again = await loader(service, publicId, {
      "accept-encoding": "gzip",
      "if-none-match": `W/${etag}`,
    });
    expect([again.status, again.bytes.length, again.headers.get("etag")]).toEqual([304, 0, etag]);
    // HEAD: the 200 names the GET's length; a 304 names none (RFC 9110 §8.6).
    const head = (headers: Record<string, string>) =>
      rawHttp(service, "HEAD", `/loader/${publicId}.js`, { "accept-encoding": "gzip", ...headers });
    const full = await head({});
    expect([full.status, full.bytes.length, full.headers.get("content-length")]).toEqual([
      200,
      0,
      String(first.bytes.length),
    ]);
    expect(full.headers.get("etag")).toBe(etag);
    const unchanged = await head({ "if-none-match": etag });
    expect([unchanged.status, unchanged.headers.get("content-length")]).toEqual([304, null]);
    const stale = await loader(service, publicId, {
      "accept-encoding": "gzip",
      "if-none-match": '"old"',
    });
    expect(stale.status).toBe(200);
  });

  it("answers 404 for unknown, malformed and inactive banners", async () => {
    expect((await loader(service, crypto.randomUUID())).status).toBe(404);
    expect((await http(service, "GET", "/loader/not-a-banner.js")).status).toBe(404);
    const { key, id, publicId } = await bannerFixture(service);
    expect((await loader(service, publicId)).status).toBe(200);
    // The id in either case; the file name as written.
    expect((await loader(service, publicId.toUpperCase())).status).toBe(200);
    expect((await http(service, "GET", `/loader/${publicId}.JS`)).status).toBe(404);
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    const inactive = await loader(service, publicId);
    expect([inactive.status, inactive.headers.get("cache-control")]).toEqual([404, "no-store"]);
    // Switched back on: served at once, not after the 404 the loader remembered.
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: true } });
    expect((await loader(service, publicId)).status).toBe(200);
  });

  it("serves a publish at once, and never an unpublished draft", async () => {
    const { key, id, publicId } = await bannerFixture(service);
    const before = await loader(service, publicId);
    await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { position: "top" } },
    });
    const draft = await loader(service, publicId);
    expect(draft.headers.get("etag")).toBe(before.headers.get("etag"));
    await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    const published = await loader(service, publicId);
    expect(published.headers.get("etag")).not.toBe(before.headers.get("etag"));
    expect(configOf(published.bytes)).toMatchObject({ revision: 2, position: "top" });
  });

  it("picks the jurisdiction rule from the trusted geo header, varies on it, and keeps it from shared caches", async () => {
    const { publicId } = await bannerFixture(service, {
      configuration: { jurisdictionRules: rules },
    });
    const at = async (place?: string) => {
      const result = await loader(service, publicId, place ? { "cf-ipcountry": place } : {});
      expect(result.headers.get("vary")).toBe("Accept-Encoding, CF-IPCountry");
      // A CDN that keys on the URL alone (Cloudflare's, whatever the Vary) must not hand one
      // visitor's rule and location to the next: the browser alone keeps it.
      expect(result.headers.get("cache-control")).toBe(
        "private, max-age=300, stale-while-revalidate=60",
      );
      const config = configOf(result.bytes);
      return [config.rule, config.country, config.region];
    };
    expect(await at("DE")).toEqual([{ id: "eu", mode: "opt_in", us: false }, "DE", undefined]);
    expect(await at("US-CA")).toEqual([{ id: "us-ca", mode: "opt_out", us: true }, "US", "US-CA"]);
    expect(await at("US")).toEqual([{ id: "everyone", mode: "notice", us: true }, "US", undefined]);
    expect(await at()).toEqual([
      { id: "everyone", mode: "notice", us: false },
      undefined,
      undefined,
    ]);
    // What providers send for a place that is no country is no location.
    for (const nowhere of ["XX", "T1", "EU", "A1", "ZZ"]) {
      expect([nowhere, await at(nowhere)]).toEqual([
        nowhere,
        [{ id: "everyone", mode: "notice", us: false }, undefined, undefined],
      ]);
    }
  });

  it("gives visitors of one country one body when no rule names a region, and no visitor's region", async () => {
    const { publicId } = await bannerFixture(service, {
      configuration: {
        jurisdictionRules: [rules[0], { id: "us", countries: ["US"], mode: "opt_out" }],
      },
    });
    const first = await loader(service, publicId, { "cf-ipcountry": "US-CA" });
    const second = await loader(service, publicId, { "cf-ipcountry": "US-NY" });
    expect(configOf(first.bytes)).toMatchObject({ rule: { id: "us" }, country: "US" });
    expect(configOf(first.bytes).region).toBeUndefined();
    expect(second.headers.get("etag")).toBe(first.headers.get("etag"));
    expect(second.bytes.equals(first.bytes)).toBe(true);
  });

  it("reads the geo header only from a trusted proxy: from any other peer it names nothing", async () => {
    const untrusting = await startTestService({
      gateway: true,
      env: { CONSENT_GEO_HEADER: "CF-IPCountry", CONSENT_TRUST_PROXY: "192.0.2.1" },
    });
    try {
      const { publicId } = await bannerFixture(untrusting, {
        configuration: { jurisdictionRules: rules },
      });
      const result = await loader(untrusting, publicId, { "cf-ipcountry": "DE" });
      expect(result.status).toBe(200);
      const config = configOf(result.bytes);
      expect(config.rule).toEqual({ id: "everyone", mode: "notice", us: false });
      expect(config.country).toBeUndefined();
    } finally {
      await untrusting.close();
    }
  });

  it("embeds the operator's texts so that none ends, comments out or breaks a <script> holding the body", async () => {
    const title = "</script><p id=injected>Won</p><script>";
    const description = "<!-- a\u2028line\u2029apart </SCRIPT >";
    const { publicId } = await bannerFixture(service, {
      configuration: { texts: { en: { title, description } } },
    });
    const body = (await loader(service, publicId)).bytes.toString("utf8");
    expect(body.match(/<\/script|<!--|[\u2028\u2029]/gi)).toBeNull();
    expect(configOf(Buffer.from(body)).texts.en).toMatchObject({ title, description });
  });
});
