import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBanner, createTeam, http, mintKey, operator, rawHttp } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * decisions §2 and docs/behaviour.md: a request carrying the consent_session cookie with two
 * different values (one a sibling subdomain set for the parent domain) is judged by neither.
 */
describe("a dashboard session cookie sent twice", () => {
  let service: TestService;
  let origin: string;
  let ownSession: string;
  let otherSession: string;
  let otherKey: string;
  let ip = 0;

  beforeAll(async () => {
    service = await startTestService({ gateway: true, env: { CONSENT_TRUST_PROXY: "loopback" } });
    origin = new URL(service.config.baseUrl).origin;
    const { admin, auth } = operator(service);
    const own = await createTeam(service);
    const other = await createTeam(service);
    otherKey = (await mintKey(service, other)).key;
    await createBanner(service, otherKey, { name: "Other team's banner" });
    ownSession = (await admin.createSession({ teamId: own }, auth)).token;
    otherSession = (await admin.createSession({ teamId: other }, auth)).token;
  });
  afterAll(() => service.close());

  /** A banner creation with `cookie`, from a fresh client IP unless `from` names one. */
  function create(cookie: string, from = `198.51.100.${++ip}`) {
    return http(service, "POST", "/api/v1/banners", {
      headers: { cookie, origin, "x-forwarded-for": from },
      body: { name: "Dashboard's banner", domain: "own.example.com", configuration: {} },
    });
  }

  const otherTeamsBanners = async () =>
    (await http(service, "GET", "/api/v1/banners", { key: otherKey })).body.data.banners.map(
      (banner: { name: string }) => banner.name,
    );

  it("401 unauthorized in either order, and nothing is written to either team", async () => {
    for (const cookie of [
      `consent_session=${otherSession}; theme=dark; consent_session=${ownSession}`,
      `consent_session=${ownSession};consent_session="${otherSession}"`,
      `consent_session=; consent_session=${ownSession}`,
    ]) {
      const result = await create(cookie);
      expect(result.status).toBe(401);
      expect(result.body).toEqual({
        data: {
          code: "unauthorized",
          error: expect.stringMatching(
            /^The request carries 2 different consent_session cookies, so its dashboard session is unknown/,
          ),
        },
        version: "v1",
      });
      expect(result.headers.get("x-ratelimit-limit")).toBeNull();
    }
    expect(await otherTeamsBanners()).toEqual(["Other team's banner"]);
    const own = await http(service, "GET", "/api/v1/banners", {
      headers: { cookie: `consent_session=${ownSession}` },
    });
    expect(own.body.data.banners).toEqual([]);
  });

  it("401 for two Cookie header fields too, on every banner route and method", async () => {
    const { id } = await createBanner(service, otherKey);
    for (const [method, path] of [
      ["GET", "/api/v1/banners"],
      ["HEAD", "/api/v1/banners"],
      ["GET", `/api/v1/banners/${id}`],
      ["PATCH", `/api/v1/banners/${id}`],
      ["POST", `/api/v1/banners/${id}/publish`],
    ] as const) {
      const result = await rawHttp(service, method, path, [
        "Host",
        new URL(service.gatewayUrl).host,
        "Cookie",
        `consent_session=${otherSession}`,
        "Cookie",
        `consent_session=${ownSession}`,
        "Origin",
        origin,
        "X-Forwarded-For",
        `198.51.100.${++ip}`,
      ]);
      expect([method, path, result.status]).toEqual([method, path, 401]);
    }
  });

  it("is not a failed attempt: the address's valid session still works after many", async () => {
    const from = "203.0.113.77";
    for (let i = 0; i < 12; i++) {
      expect(
        (await create(`consent_session=${otherSession}; consent_session=x${i}`, from)).status,
      ).toBe(401);
    }
    expect((await create(`consent_session=${ownSession}`, from)).status).toBe(201);
  });

  it("takes one value sent twice as that session, and an API key whatever the cookies", async () => {
    expect(
      (await create(`consent_session=${ownSession}; consent_session="${ownSession}"`)).status,
    ).toBe(201);
    const byKey = await http(service, "GET", "/api/v1/banners", {
      key: otherKey,
      headers: { cookie: `consent_session=${ownSession}; consent_session=${otherSession}` },
    });
    expect(byKey.status).toBe(200);
    const resolve = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: otherKey,
      headers: { cookie: `consent_session=${ownSession}; consent_session=${otherSession}` },
      body: { bannerId: "00000000-0000-4000-8000-000000000000", subjectId: "s" },
    });
    expect(resolve.status).toBe(404);
  });

  it("reads a Cookie header of blank runs in linear time: a near-limit header is answered at once", async () => {
    // A name of 15,000 spaces between two letters, within Node's 16 KiB of header fields: read
    // with a trim that backtracks through the run from every space, each request held the event
    // loop for most of a second, every other request with it. Not a speed check: 30 such
    // requests took about 27 s that way, and take a small fraction of the 10 s bound now, even on
    // a machine busy with other tests.
    const cookie = `a${" ".repeat(15_000)}b=1; consent_session=${ownSession}`;
    const started = performance.now();
    for (let i = 0; i < 30; i++) {
      const result = await http(service, "GET", "/api/v1/banners", {
        headers: { cookie, "x-forwarded-for": `198.51.100.${++ip}` },
      });
      expect(result.status).toBe(200);
    }
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
