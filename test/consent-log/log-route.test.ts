import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { http, rawHttp } from "#test/support/api.js";
import {
  aChoice,
  bannerFixture,
  ipSource,
  postLog,
  storedRows,
  useVisitorService,
} from "#test/support/consent-log.js";

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** decisions §5 over real HTTP: payload, methods, bodies, storage and errors of the log route. */
describe("POST /api/consent/log", () => {
  const ctx = useVisitorService("2026-11-22T12:00:10.000Z", {
    CONSENT_BASE_URL: "https://consent.example.org",
  });
  const ip = ipSource();

  it("stores an explicit choice and answers success, a UUIDv7 consentLogId and a preferences link", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const consentId = "0b6f9a52-4d1e-4c3b-9a8e-2f1d0c9b8a7e";
    const timestamp = new Date(ctx.clock.now - 2_000).toISOString();
    const result = await postLog(ctx.service, aChoice(publicId, { consentId, timestamp }), {
      ip: ip(),
    });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      success: true,
      consentLogId: expect.stringMatching(UUID_V7),
      managePreferences: expect.stringMatching(
        /^https:\/\/consent\.example\.org\/preferences\/[A-Za-z0-9_-]{50}\.[A-Za-z0-9_-]{22}$/,
      ),
    });
    const [row] = await storedRows(ctx.service, teamId);
    expect(row).toMatchObject({
      id: result.body.consentLogId,
      publicId,
      consentId,
      method: "consent_given",
      preferences: { necessary: true, analytics: true, marketing: false },
      timestampClamped: false,
      receivedAt: new Date(ctx.clock.now),
    });
  });

  it("accepts every method of spec 3.3; consent_default rows get no preferences link", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const methods = [
      "consent_given",
      "consent_changed",
      "consent_default",
      "accept_all",
      "accept_necessary",
    ];
    for (const method of methods) {
      const result = await postLog(ctx.service, aChoice(publicId, { method }), { ip: ip() });
      expect(result.status).toBe(200);
      expect("managePreferences" in result.body).toBe(method !== "consent_default");
    }
    expect((await storedRows(ctx.service, teamId)).map((r) => r.method).toReversed()).toEqual(
      methods,
    );
    const refused = await postLog(ctx.service, aChoice(publicId, { method: "reject_all" }), {
      ip: ip(),
    });
    expect([refused.status, refused.body.success, refused.body.code]).toEqual([
      400,
      false,
      "invalid_request",
    ]);
    expect(refused.body.details[0].message).toMatch(/^method must be one of/);
  });

  it("reads application/json and text/plain bodies alike (sendBeacon sends text/plain)", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    for (const contentType of ["application/json", "text/plain;charset=UTF-8", "text/plain"]) {
      const result = await postLog(ctx.service, aChoice(publicId), { ip: ip(), contentType });
      expect(result.status).toBe(200);
    }
    expect(await storedRows(ctx.service, teamId)).toHaveLength(3);
  });

  it("refuses any other Content-Type with 400 invalid_request, recording nothing", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    for (const contentType of ["application/x-www-form-urlencoded", "multipart/form-data", ""]) {
      const refused = await postLog(ctx.service, aChoice(publicId), { ip: ip(), contentType });
      expect([refused.status, refused.body]).toEqual([
        400,
        {
          success: false,
          error: "Content-Type must be application/json or text/plain",
          code: "invalid_request",
        },
      ]);
    }
    expect(await storedRows(ctx.service, teamId)).toEqual([]);
  });

  it("refuses invalid JSON, prototype poisoning and missing fields with 400 invalid_request, unenveloped", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const invalid = await postLog(ctx.service, "{not json", { ip: ip() });
    expect(invalid.body).toEqual({
      success: false,
      error: "Request body is not valid JSON",
      code: "invalid_request",
      details: [{ message: "The request body is not valid JSON" }],
    });
    const poisoned = `{"bannerId":"${publicId}","__proto__":{"admin":true},"preferences":{},"method":"accept_all","timestamp":"2026-11-22T12:00:00Z"}`;
    expect((await postLog(ctx.service, poisoned, { ip: ip() })).status).toBe(400);
    const missing = await postLog(ctx.service, { bannerId: publicId }, { ip: ip() });
    expect(missing.status).toBe(400);
    expect(missing.body.details.map((d: { message: string }) => d.message)).toEqual([
      "preferences is required",
      "method is required",
      "timestamp is required",
    ]);
    expect("data" in missing.body || "version" in missing.body).toBe(false);
    expect(await storedRows(ctx.service, teamId)).toEqual([]);
  });

  it("refuses a body that is not UTF-8 as invalid JSON, unenveloped; a UTF-8 BOM is read past", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    /** The payload's bytes with `bytes` in place of the # of its languageCode. */
    const withBytes = (bytes: number[]) => {
      const [head, tail] = JSON.stringify(aChoice(publicId, { languageCode: "de#" })).split("#");
      return Buffer.concat([
        Buffer.from(head as string),
        Buffer.from(bytes),
        Buffer.from(tail as string),
      ]);
    };
    const send = async (body: Buffer) => {
      const result = await http(ctx.service, "POST", "/api/consent/log", {
        body,
        headers: {
          "content-type": "text/plain;charset=UTF-8",
          origin: "https://shop.example.com",
          "x-forwarded-for": ip(),
        },
      });
      return { status: result.status, body: result.body };
    };
    for (const bytes of [[0xff], [0xc3], [0xed, 0xa0, 0x80]]) {
      expect(await send(withBytes(bytes))).toEqual({
        status: 400,
        body: {
          success: false,
          error: "Request body is not valid JSON",
          code: "invalid_request",
          details: [{ message: "The request body is not valid JSON" }],
        },
      });
    }
    expect(await storedRows(ctx.service, teamId)).toEqual([]);
    const stored = await send(
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), withBytes([0xc3, 0xbf])]),
    );
    expect([stored.status, stored.body.success]).toEqual([200, true]);
    expect((await storedRows(ctx.service, teamId)).map((row) => row.languageCode)).toEqual([
      "de\u00ff",
    ]);
  });

  it("refuses preference names that are empty, too long or hold control characters, naming the map only", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    for (const [name, rule] of [
      ["", "must be 1-100 characters"],
      ["x".repeat(101), "must be 1-100 characters"],
      ["analytics\u0000", "must not contain control characters"],
      ["ads\u001b[2J", "must not contain control characters"],
    ]) {
      const refused = await postLog(
        ctx.service,
        aChoice(publicId, { preferences: { necessary: true, [name as string]: true } }),
        { ip: ip() },
      );
      expect([refused.status, refused.body.details]).toEqual([
        400,
        [{ field: "preferences", message: `preferences keys ${rule}` }],
      ]);
    }
    expect(await storedRows(ctx.service, teamId)).toEqual([]);
  });

  it("refuses control characters in the labels a row keeps, which an operator's terminal would run", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const refused = await postLog(
      ctx.service,
      aChoice(publicId, {
        languageCode: "en\u001b]0;x\u0007",
        country: "DE\n",
        region: "\u009b31m",
        matchedRuleId: "eu\u007f",
      }),
      { ip: ip() },
    );
    expect([refused.status, refused.body.details]).toEqual([
      400,
      ["languageCode", "country", "region", "matchedRuleId"].map((field) => ({
        field,
        message: `${field} must not contain control characters`,
      })),
    ]);
    expect(await storedRows(ctx.service, teamId)).toEqual([]);
  });

  it("ignores unknown fields and never stores them", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const body = aChoice(publicId, { userAgent: "Mozilla/5.0 Test", ip: "203.0.113.9", extra: 1 });
    expect((await postLog(ctx.service, body, { ip: "203.0.113.9" })).status).toBe(200);
    const [row] = await storedRows(ctx.service, teamId);
    const stored = JSON.stringify(row);
    expect(stored).not.toContain("203.0.113.9");
    expect(stored).not.toContain("Mozilla");
    expect(Object.keys(row ?? {})).not.toContain("extra");
  });

  it("never stores the client's IP address or user agent", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    await postLog(ctx.service, aChoice(publicId), {
      ip: "192.0.2.77",
      headers: { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) UniqueAgent/1.0" },
    });
    const stored = JSON.stringify(await storedRows(ctx.service, teamId));
    expect(stored).not.toMatch(/192\.0\.2\.77|UniqueAgent/);
  });

  it("keeps the optional fields of decisions §5", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const optional = {
      revision: 1,
      languageCode: "de",
      country: "US",
      region: "US-CA",
      matchedRuleId: "us-ca",
      gpc: true,
      purposeChoices: { saleSharing: true, targetedAdvertising: true, other: 1 },
    };
    await postLog(ctx.service, aChoice(publicId, optional), { ip: ip() });
    const [row] = await storedRows(ctx.service, teamId);
    expect(row).toMatchObject({
      ...optional,
      purposeChoices: { saleSharing: true, targetedAdvertising: true },
    });
    expect(row?.consentId).toMatch(/^[0-9a-f-]{36}$/); // made by the server when absent
  });

  it("keeps the accepted categories' services the runtime sends (spec 2.4), and refuses malformed ones", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const services = { necessary: ["Shop session"], analytics: ["Matomo", "Google Analytics"] };
    const kept = await postLog(ctx.service, aChoice(publicId, { services }), { ip: ip() });
    expect(kept.status).toBe(200);
    const [row] = await storedRows(ctx.service, teamId);
    expect(row?.services).toEqual(services);
    for (const [wrong, field, message] of [
      [{ analytics: "Matomo" }, "services.analytics", "must be an array"],
      [
        { analytics: ["Google\u0007Ads"] },
        "services.analytics[0]",
        "must not contain control characters",
      ],
      [
        { analytics: Array.from({ length: 101 }, (_, i) => `s${i}`) },
        "services.analytics",
        "must have at most 100 entries",
      ],
      [
        Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`c${i}`, ["s"]])),
        "services",
        "must have at most 50 entries",
      ],
    ] as const) {
      const refused = await postLog(ctx.service, aChoice(publicId, { services: wrong }), {
        ip: ip(),
      });
      expect([refused.status, refused.body.code]).toEqual([400, "invalid_request"]);
      expect(refused.body.details).toEqual([{ field, message: `${field} ${message}` }]);
    }
    expect(await storedRows(ctx.service, teamId)).toHaveLength(1);
  });

  it("reduces pageUrl, else the Referer, to the banner's telemetry level", async () => {
    const page = "https://shop.example.com/checkout/step-2?email=a@b.example#pay";
    const cases = [
      ["origin", { pageUrl: page }, "", "https://shop.example.com"],
      ["path", { pageUrl: page }, "", "https://shop.example.com/checkout/step-2"],
      ["none", { pageUrl: page }, "", undefined],
      ["path", {}, "https://shop.example.com/cart?id=7", "https://shop.example.com/cart"],
      ["origin", { pageUrl: "not a url" }, "", undefined],
      // An address off the banner's hosts is not kept; the Referer stands in when it is on them.
      [
        "path",
        { pageUrl: "https://evil.test/x" },
        "https://shop.example.com/cart",
        "https://shop.example.com/cart",
      ],
      ["origin", { pageUrl: "https://evil.test/x" }, "https://evil.test/", undefined],
      ["path", { pageUrl: "https://eu.shop.example.com/a?b" }, "", "https://eu.shop.example.com/a"],
      // A fully qualified name's dot is dropped, as the domain check reads the host.
      [
        "path",
        { pageUrl: "https://Shop.Example.com./cart?x" },
        "",
        "https://shop.example.com/cart",
      ],
      ["origin", { pageUrl: "https://shop.example.com./cart" }, "", "https://shop.example.com"],
      // Another port is another site (decisions §5): not the banner's, so not kept.
      ["origin", {}, "https://shop.example.com.:8443/x", undefined],
      // A long query is no reason to lose the choice: the row never keeps it anyway.
      [
        "path",
        { pageUrl: `https://shop.example.com/cart?q=${"x".repeat(10_000)}` },
        "",
        "https://shop.example.com/cart",
      ],
      // Too long to keep even reduced: dropped, and the Referer stands in when it fits.
      [
        "path",
        { pageUrl: `https://shop.example.com/${"p".repeat(5_000)}` },
        "https://shop.example.com/cart",
        "https://shop.example.com/cart",
      ],
      ["path", { pageUrl: `https://shop.example.com/${"p".repeat(5_000)}` }, "", undefined],
      // Path parameters (a session id in the address) are not kept either.
      [
        "path",
        { pageUrl: "https://shop.example.com/cart;jsessionid=0AB12/item;v=2" },
        "",
        "https://shop.example.com/cart/item",
      ],
    ] as const;
    for (const [telemetryLevel, fields, referer, expected] of cases) {
      const { teamId, publicId } = await bannerFixture(ctx.service, {
        configuration: { telemetryLevel },
      });
      const logged = await postLog(ctx.service, aChoice(publicId, fields), { ip: ip(), referer });
      expect(logged.status).toBe(200);
      const [row] = await storedRows(ctx.service, teamId);
      expect(row?.pageUrl).toBe(expected);
    }
  });

  it("clamps client timestamps outside [received - 24 h, received + 5 min] and marks them", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const at = (ms: number) => new Date(ctx.clock.now + ms).toISOString();
    const H = 3_600_000;
    for (const offset of [-48 * H, -23 * H, 4 * 60_000, 2 * H]) {
      await postLog(ctx.service, aChoice(publicId, { timestamp: at(offset) }), { ip: ip() });
    }
    const rows = (await storedRows(ctx.service, teamId)).toReversed();
    expect(rows.map((r) => [r.occurredAt.toISOString(), r.timestampClamped])).toEqual([
      [at(-24 * H), true],
      [at(-23 * H), false],
      [at(4 * 60_000), false],
      [at(5 * 60_000), true],
    ]);
  });

  it("answers 404 not_found for an unknown or inactive banner", async () => {
    const unknown = await postLog(ctx.service, aChoice(crypto.randomUUID()), { ip: ip() });
    expect([unknown.status, unknown.body.success, unknown.body.code]).toEqual([
      404,
      false,
      "not_found",
    ]);
    const { key, id, publicId } = await bannerFixture(ctx.service);
    await http(ctx.service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    expect((await postLog(ctx.service, aChoice(publicId), { ip: ip() })).status).toBe(404);
  });

  it("answers 413 invalid_request for a body over 20 KB", async () => {
    const { publicId } = await bannerFixture(ctx.service);
    const result = await postLog(
      ctx.service,
      aChoice(publicId, { padding: "x".repeat(20 * 1024) }),
      {
        ip: ip(),
      },
    );
    expect([result.status, result.body.success, result.body.code]).toEqual([
      413,
      false,
      "invalid_request",
    ]);
  });

  it("answers 405 with Allow to other methods", async () => {
    const result = await http(ctx.service, "GET", "/api/consent/log");
    expect([result.status, result.headers.get("allow"), result.body.code]).toEqual([
      405,
      "POST, OPTIONS",
      "method_not_allowed",
    ]);
    const trace = await rawHttp(ctx.service, "TRACE", "/api/consent/log", {
      origin: "https://shop.example.com",
    });
    expect([trace.status, trace.headers.get("allow")]).toEqual([405, "POST, OPTIONS"]);
    expect(trace.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    expect(JSON.parse(trace.text)).toMatchObject({ success: false, code: "method_not_allowed" });
  });

  it("takes each id above the store's newest: a choice recorded by a daemon whose clock ran ahead stays the older one", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const consentId = "5d0f3a1e-8c2b-4e7a-9f61-3b2c1d0e9f8a";
    await postLog(ctx.service, aChoice(publicId, { consentId }), { ip: ip() });
    const [first] = await storedRows(ctx.service, teamId);
    if (!first) throw new Error("the first choice was not stored");
    // The same choice as another daemon on this store recorded it, its clock an hour ahead (or
    // this one before a restart, its clock since set back).
    const ahead = { ...first, id: uuidv7({ msecs: ctx.clock.now + 3_600_000 }) };
    await ctx.service.store.consentLog.append(ahead);
    const preferences = { necessary: true, analytics: false, marketing: false };
    const changed = await postLog(
      ctx.service,
      aChoice(publicId, { consentId, method: "consent_changed", preferences }),
      { ip: ip() },
    );
    const id = changed.body.consentLogId as string;
    expect(id > ahead.id).toBe(true);
    // Newest first is the order they were written in, and the visitor's current choice the last.
    expect((await storedRows(ctx.service, teamId)).map((row) => row.id)).toEqual([
      id,
      ahead.id,
      first.id,
    ]);
    const latest = await ctx.service.store.consentLog.latestByConsentId(
      teamId,
      first.bannerId,
      consentId,
    );
    expect(latest).toMatchObject({ id, preferences });
  });

  it("moves on with the clock: received times come from the server", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    ctx.clock.now += 60_000;
    await postLog(ctx.service, aChoice(publicId), { ip: ip() });
    const [row] = await storedRows(ctx.service, teamId);
    expect(row?.receivedAt).toEqual(new Date(ctx.clock.now));
  });
});
