import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  consentState,
  createBanner,
  createTeam,
  http,
  mintKey,
  operator,
} from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

interface Route {
  name: string;
  method: string;
  /** The route's address, naming `banner` where it names one. */
  path: (banner: string) => string;
  body?: () => unknown;
  scope: string;
  write: boolean;
  crossDevice: boolean;
  ok: number;
}

/**
 * The credential matrix of spec 5 and decisions §2, per route: which credential passes, which code
 * each failure gets, and the check order (scope → test key → plan).
 */
describe("authentication, scopes, test keys and plans per route", () => {
  let service: TestService;
  let bannerId: string;
  let publicId: string;
  let ip = 0;
  const keys: Record<string, string> = {};
  let session: string;
  /**
   * decisions §2: "Cross-device consent (the subject endpoints) is in `professional`, `business`
   * and `enterprise`." The plans without it, each a team with a banner of its own, and the key's
   * limit (spec 8).
   */
  const withoutCrossDevice = [
    { plan: "free", limit: "50" },
    { plan: "starter", limit: "200" },
  ];
  const ownBanner: Record<string, string> = {};
  const subject = () => ({ bannerId: publicId, subjectId: `matrix-${ip}` });

  const routes: Route[] = [
    {
      name: "list banners",
      method: "GET",
      path: () => "/api/v1/banners",
      scope: "banners:read",
      write: false,
      crossDevice: false,
      ok: 200,
    },
    {
      name: "create banner",
      method: "POST",
      path: () => "/api/v1/banners",
      body: () => ({ name: "B", domain: "b.example.org", configuration: {} }),
      scope: "banners:write",
      write: true,
      crossDevice: false,
      ok: 201,
    },
    {
      name: "get banner",
      method: "GET",
      path: (banner) => `/api/v1/banners/${banner}`,
      scope: "banners:read",
      write: false,
      crossDevice: false,
      ok: 200,
    },
    {
      name: "update banner",
      method: "PATCH",
      path: (banner) => `/api/v1/banners/${banner}`,
      body: () => ({ name: "Renamed" }),
      scope: "banners:write",
      write: true,
      crossDevice: false,
      ok: 200,
    },
    {
      name: "publish banner",
      method: "POST",
      path: (banner) => `/api/v1/banners/${banner}/publish`,
      scope: "banners:write",
      write: true,
      crossDevice: false,
      ok: 200,
    },
    {
      name: "resolve subject",
      method: "POST",
      path: () => "/api/v1/consent/subjects/resolve",
      body: subject,
      scope: "consent:read",
      write: false,
      crossDevice: true,
      ok: 200,
    },
    {
      name: "put state",
      method: "PUT",
      path: () => "/api/v1/consent/subjects/state",
      body: () => ({ ...subject(), baseVersion: 0, consentState: consentState() }),
      scope: "consent:write",
      write: true,
      crossDevice: true,
      ok: 200,
    },
    {
      name: "delete state",
      method: "DELETE",
      path: () => "/api/v1/consent/subjects/state",
      body: subject,
      scope: "consent:write",
      write: true,
      crossDevice: true,
      ok: 200,
    },
  ];

  beforeAll(async () => {
    service = await startTestService({ gateway: true, env: { CONSENT_TRUST_PROXY: "127.0.0.1" } });
    const pro = await createTeam(service, "professional");
    const free = await createTeam(service, "free");
    keys.live = (await mintKey(service, pro)).key;
    keys.test = (await mintKey(service, pro, { environment: "test" })).key;
    keys.free = (await mintKey(service, free)).key;
    keys.freeTest = (await mintKey(service, free, { environment: "test" })).key;
    keys.starter = (await mintKey(service, await createTeam(service, "starter"))).key;
    keys.none = (await mintKey(service, pro, { scopes: ["logs:read"] })).key;
    ({ id: bannerId, publicId } = await createBanner(service, keys.live as string));
    for (const { plan } of withoutCrossDevice)
      ownBanner[plan] = (await createBanner(service, keys[plan] as string)).id;
    const { admin, auth } = operator(service);
    session = (await admin.createSession({ teamId: pro }, auth)).token;
  });
  afterAll(() => service.close());

  /** Calls a route from a fresh client IP, so failed attempts never trip the per-IP limit. */
  async function call(
    route: Route,
    credentials: { key?: string; cookie?: string; origin?: string; banner?: string },
  ) {
    ip++;
    const headers: Record<string, string> = { "x-forwarded-for": `198.51.100.${ip % 250}` };
    if (credentials.cookie) headers.cookie = `consent_session=${credentials.cookie}`;
    if (credentials.origin) headers.origin = credentials.origin;
    const result = await http(service, route.method, route.path(credentials.banner ?? bannerId), {
      key: credentials.key,
      body: route.body?.(),
      headers,
    });
    return {
      status: result.status,
      code: result.body?.data?.code,
      error: result.body?.data?.error,
      limited: result.headers.get("x-ratelimit-limit"),
      cacheControl: result.headers.get("cache-control"),
    };
  }

  for (const route of routes) {
    describe(route.name, () => {
      it("401 unauthorized without a credential; 401 invalid_key with a bad one", async () => {
        expect(await call(route, {})).toMatchObject({
          status: 401,
          code: "unauthorized",
          limited: null,
        });
        expect(await call(route, { key: "ck_live_0000" })).toMatchObject({
          status: 401,
          code: "invalid_key",
          limited: null,
        });
      });

      it(`403 missing_scope without ${route.scope}`, async () => {
        expect(await call(route, { key: keys.none })).toMatchObject({
          status: 403,
          code: "missing_scope",
          limited: null,
        });
      });

      it(route.write ? "403 test_key_read_only for a test key" : "answers a test key", async () => {
        const result = await call(route, { key: keys.test });
        if (route.write)
          expect(result).toMatchObject({ status: 403, code: "test_key_read_only", limited: null });
        else expect(result.status).toBe(route.ok);
      });

      for (const { plan, limit } of withoutCrossDevice) {
        it(
          route.crossDevice ? `403 plan_required on the ${plan} plan` : `answers the ${plan} plan`,
          async () => {
            const result = await call(route, { key: keys[plan], banner: ownBanner[plan] });
            if (route.crossDevice)
              expect(result).toMatchObject({ status: 403, code: "plan_required", limited: null });
            else expect([result.status, result.limited]).toEqual([route.ok, limit]);
          },
        );
      }

      it("answers a live key with the scope, with rate-limit headers", async () => {
        const result = await call(route, { key: keys.live });
        expect(result.status).toBe(route.ok);
        expect(result.limited).toBe("500");
      });

      it(
        route.crossDevice ? "refuses a dashboard session" : "accepts a dashboard session",
        async () => {
          const result = await call(route, { cookie: session, origin: "http://localhost:8080" });
          if (route.crossDevice)
            expect(result).toMatchObject({ status: 401, code: "unauthorized" });
          else expect([result.status, result.limited]).toEqual([route.ok, "100"]);
        },
      );
    });
  }

  it("checks the scope before the test key, and the test key before the plan", async () => {
    const put = routes.find((r) => r.name === "put state") as Route;
    const testNoScope = (
      await mintKey(service, await createTeam(service, "free"), {
        environment: "test",
        scopes: ["consent:read"],
      })
    ).key;
    expect(await call(put, { key: testNoScope })).toMatchObject({ code: "missing_scope" });
    expect(await call(put, { key: keys.freeTest })).toMatchObject({ code: "test_key_read_only" });
  });

  it("refuses a session write whose Origin is not the dashboard's (CSRF), but allows its reads", async () => {
    const create = routes.find((r) => r.name === "create banner") as Route;
    const list = routes.find((r) => r.name === "list banners") as Route;
    expect(await call(create, { cookie: session, origin: "https://evil.example" })).toMatchObject({
      status: 403,
      code: "origin_not_allowed",
      error: expect.stringMatching(/origin \(http:\/\/.+\), not https:\/\/evil\.example$/),
    });
    expect(await call(create, { cookie: session })).toMatchObject({
      status: 403,
      code: "origin_not_allowed",
      error: expect.stringMatching(/must carry the dashboard's Origin header \(http:\/\/.+\)$/),
    });
    // A team's data for a session cookie, which HTTP caches do not keep apart as they keep
    // answers to Authorization: no cache may keep it, nor a refusal.
    expect(await call(list, { cookie: session })).toMatchObject({
      status: 200,
      cacheControl: "no-store",
    });
    expect(await call(list, {})).toMatchObject({ status: 401, cacheControl: "no-store" });
  });

  it("refuses an expired or revoked session", async () => {
    const { admin, auth } = operator(service);
    const list = routes.find((r) => r.name === "list banners") as Route;
    const teamId = await createTeam(service);
    const { session: minted, token } = await admin.createSession({ teamId }, auth);
    expect((await call(list, { cookie: token })).status).toBe(200);
    await admin.revokeSession({ id: minted?.id as string }, auth);
    expect(await call(list, { cookie: token })).toMatchObject({
      status: 401,
      code: "unauthorized",
    });
    expect(await call(list, { cookie: "cs_forged" })).toMatchObject({
      status: 401,
      code: "unauthorized",
    });
  });

  it("takes a stray session cookie that decodes beyond Latin-1 as an unknown session, never a 500", async () => {
    const list = routes.find((r) => r.name === "list banners") as Route;
    const resolve = routes.find((r) => r.name === "resolve subject") as Route;
    expect(await call(list, { cookie: "%E2%82%AC" })).toMatchObject({
      status: 401,
      code: "unauthorized",
    });
    expect((await call(list, { cookie: "%E2%82%AC", key: keys.live })).status).toBe(200);
    expect((await call(resolve, { cookie: "%E2%82%AC", key: keys.live })).status).toBe(200);
  });

  it("reads a session cookie whose value is quoted (RFC 6265 §4.1.1), as it reads it bare", async () => {
    const list = routes.find((r) => r.name === "list banners") as Route;
    expect(await call(list, { cookie: `"${session}"` })).toMatchObject({ status: 200 });
    // Only a whole pair of quotes is the syntax's; one alone is part of an unknown value.
    expect(await call(list, { cookie: `"${session}` })).toMatchObject({
      status: 401,
      code: "unauthorized",
    });
  });

  it("reads a public Banner ID in either case (a UUID)", async () => {
    const resolve = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: keys.live,
      body: { bannerId: publicId.toUpperCase(), subjectId: "case-check" },
      headers: { "x-forwarded-for": "198.51.100.251" },
    });
    expect([resolve.status, resolve.body.data.found]).toEqual([200, false]);
  });
});
