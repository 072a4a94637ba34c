import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "#gen/grpc/health/v1/health_pb.js";
import {
  consentState,
  createBanner,
  createTeam,
  http,
  mintKey,
  operator,
  rawHttp,
} from "#test/support/api.js";
import { aChoice } from "#test/support/consent-log.js";
import { rawConnection, rawExchange } from "#test/support/raw-http1.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { failureOf } from "#test/support/stand-in-daemon.js";

/** Every row of the error table of spec section 7, produced through real HTTP. */
describe("spec 7 error table", () => {
  let service: TestService;
  let now = Date.now();
  let key: string;
  let keyId: string;
  let publicId: string;
  const subject = () => ({ bannerId: publicId, subjectId: "user-42" });

  beforeAll(async () => {
    // Each test sends from its own client IP so failed-authentication limits stay apart.
    service = await startTestService({
      gateway: true,
      clock: () => new Date(now),
      env: { CONSENT_TRUST_PROXY: "127.0.0.1" },
    });
    const teamId = await createTeam(service, "professional");
    ({ key, id: keyId } = await mintKey(service, teamId));
    ({ publicId } = await createBanner(service, key));
  });
  afterAll(() => service.close());

  const envelopeOf = (result: { body: any }) => {
    expect(result.body.version).toBe("v1");
    return result.body.data;
  };

  it("400 invalid_request: a subject body that is not JSON", async () => {
    const result = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: "{not json",
    });
    expect(result.status).toBe(400);
    expect(envelopeOf(result)).toMatchObject({
      code: "invalid_request",
      details: [{ message: expect.any(String) }],
    });
  });

  it("400 invalid_request: a subject body failing validation names each field", async () => {
    const result = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: {
        bannerId: "nope",
        subjectId: "a@b",
        baseVersion: -1,
        consentState: consentState({ schemaVersion: 1, extra: true }),
      },
    });
    expect(result.status).toBe(400);
    const data = envelopeOf(result);
    expect(data.code).toBe("invalid_request");
    const fields = data.details.map((d: { field: string }) => d.field);
    expect(fields).toEqual(
      expect.arrayContaining([
        "bannerId",
        "subjectId",
        "baseVersion",
        "consentState.schemaVersion",
        "consentState.extra",
      ]),
    );
    for (const detail of data.details) expect(detail.message).toContain(detail.field);
  });

  it("400 invalid_request: a body with a __proto__ or constructor.prototype key, on every route parsing JSON, in each route's shape", async () => {
    const error = "Request body contains a forbidden key";
    const details = [
      { message: "The request body must not contain a __proto__ or constructor.prototype key" },
    ];
    const coded = { error, code: "invalid_request", details };
    const unknownId = "00000000-0000-4000-8000-000000000000";
    for (const body of [
      `{"bannerId":"${publicId}","subjectId":"s","__proto__":{"admin":true}}`,
      `{"bannerId":"${publicId}","subjectId":"s","a":[{"constructor":{"prototype":{"admin":true}}}]}`,
    ]) {
      // Banner routes keep spec 7's validation shape without a code.
      for (const [method, path, data] of [
        ["POST", "/api/v1/consent/subjects/resolve", coded],
        ["PUT", "/api/v1/consent/subjects/state", coded],
        ["DELETE", "/api/v1/consent/subjects/state", coded],
        ["POST", "/api/v1/webhooks", coded],
        ["PATCH", `/api/v1/webhooks/${unknownId}`, coded],
        ["POST", "/api/v1/banners", { error, details }],
        ["PATCH", `/api/v1/banners/${unknownId}`, { error, details }],
      ] as const) {
        const result = await http(service, method, path, { key, body });
        expect([method, path, result.status, result.body]).toEqual([
          method,
          path,
          400,
          { data, version: "v1" },
        ]);
      }
      const log = await http(service, "POST", "/api/consent/log", { body });
      expect([log.status, log.body]).toEqual([400, { success: false, ...coded }]);
    }
  });

  it("400 without a code: banner creation validation failure", async () => {
    const result = await http(service, "POST", "/api/v1/banners", {
      key,
      body: { name: "", domain: "not a domain" },
    });
    expect(result.status).toBe(400);
    const data = envelopeOf(result);
    expect(data.code).toBeUndefined();
    expect(data.error).toMatch(/name/);
    expect(data.details.map((d: { field: string }) => d.field)).toEqual([
      "name",
      "domain",
      "configuration",
    ]);
  });

  it("401 invalid_key: malformed, unknown, and wrong environment prefix", async () => {
    const forged = key.replace("ck_live_", "ck_test_");
    const unknown = `${key.slice(0, -7)}${key.at(-7) === "a" ? "b" : "a"}${key.slice(-6)}`;
    for (const [i, bad] of ["not-a-key", forged, unknown, `${key}x`].entries()) {
      const result = await http(service, "GET", "/api/v1/banners", {
        key: bad,
        headers: { "x-forwarded-for": `10.1.0.${i}` },
      });
      expect(result.status).toBe(401);
      expect(envelopeOf(result).code).toBe("invalid_key");
      expect(result.headers.get("x-ratelimit-limit")).toBeNull();
    }
    // The operator token is no API key: the REST API answers it as any unknown key.
    const operator = await http(service, "GET", "/api/v1/banners", {
      key: service.operatorToken,
      headers: { "x-forwarded-for": "10.1.2.1" },
    });
    expect([operator.status, envelopeOf(operator)]).toEqual([
      401,
      { error: "The API key is malformed or unknown", code: "invalid_key" },
    ]);
    // A working key sent other than as `Bearer <key>` (spec 5.1): malformed too, a no-break
    // space (which JavaScript's \s matches, HTTP does not) for the space included.
    const forms = [
      key,
      `Basic ${key}`,
      `Bearer ${key} x`,
      `Bearer\u00a0${key}`,
      `Bearer ${key}\u00a0`,
    ];
    for (const [i, authorization] of forms.entries()) {
      const result = await http(service, "GET", "/api/v1/banners", {
        headers: { authorization, "x-forwarded-for": `10.1.1.${i}` },
      });
      expect([authorization, result.status, envelopeOf(result).code]).toEqual([
        authorization,
        401,
        "invalid_key",
      ]);
    }
  });

  it("401 invalid_key without 100 Continue for a key whose form fails: the body is never asked for, and the daemon still counts the attempt", async () => {
    const port = Number(new URL(service.gatewayUrl).port);
    const expecting = (authorization: string, ip: string, length = 50) =>
      `POST /api/v1/consent/subjects/resolve HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nX-Forwarded-For: ${ip}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    // One checksum character changed, not a Bearer token: no store holds either.
    const badChecksum = `Bearer ${key.slice(0, -1)}${key.at(-1) === "a" ? "b" : "a"}`;
    for (const authorization of [badChecksum, `Basic ${key}`]) {
      const answer = await rawExchange(port, (write) =>
        write(expecting(authorization, "10.1.3.1")),
      );
      expect([authorization, answer.status, JSON.parse(answer.body)]).toEqual([
        authorization,
        401,
        {
          data: { error: "The API key is malformed or unknown", code: "invalid_key" },
          version: "v1",
        },
      ]);
      expect(answer.headers).toContain("connection: close");
    }
    // The daemon judged each (spec 8): the 10th failed attempt of the address blocks the 11th.
    for (let i = 2; i < 10; i++) {
      await rawExchange(port, (write) => write(expecting(badChecksum, "10.1.3.1")));
    }
    const blocked = await rawExchange(port, (write) => write(expecting(badChecksum, "10.1.3.1")));
    expect([blocked.status, JSON.parse(blocked.body).data.code]).toEqual([429, "rate_limited"]);
    // A key of valid form is told to go on, and its body is read.
    const { socket, received } = await rawConnection(port);
    const body = JSON.stringify({ bannerId: publicId, subjectId: "user-expect" });
    socket.write(expecting(`Bearer ${key}`, "10.1.3.2", body.length));
    await vi.waitFor(() => expect(received()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/));
    socket.write(body);
    await vi.waitFor(() => expect(received()).toContain('{"data":{"found":false},"version":"v1"}'));
    socket.destroy();
  });

  it("401 unauthorized without 100 Continue for a request with no credential where one is needed: the body is never asked for", async () => {
    const port = Number(new URL(service.gatewayUrl).port);
    const expecting = (method: string, path: string, credential = "") =>
      `${method} ${path} HTTP/1.1\r\nHost: x\r\n${credential}X-Forwarded-For: 10.1.4.1\r\nContent-Type: application/json\r\nContent-Length: 50\r\nExpect: 100-continue\r\n\r\n`;
    const keyOnly = "Authentication required: send an API key as a Bearer token";
    const keyOrSession =
      "Authentication required: send an API key as a Bearer token or a dashboard session cookie";
    for (const [request, message] of [
      [expecting("POST", "/api/v1/consent/subjects/resolve"), keyOnly],
      [expecting("PUT", "/api/v1/consent/subjects/state", "Authorization: \r\n"), keyOnly],
      // A session stands in for a key on the banner endpoints only (decisions §2).
      [expecting("POST", "/api/v1/webhooks", "Cookie: consent_session=s\r\n"), keyOnly],
      [expecting("POST", "/api/v1/banners"), keyOrSession],
      [expecting("PATCH", `/api/v1/banners/${publicId}`, "Cookie: other=1\r\n"), keyOrSession],
    ] as const) {
      // Answered at once, and the connection closed: the body it announced never comes.
      const answer = await rawExchange(port, (write) => write(request));
      expect([request, answer.status, JSON.parse(answer.body)]).toEqual([
        request,
        401,
        { data: { error: message, code: "unauthorized" }, version: "v1" },
      ]);
      expect(answer.headers).toContain("connection: close");
      expect(answer.headers).toContain("api-version: v1");
    }
    // A session cookie on a banner endpoint is the daemon's to judge, with the body: told to go on.
    const { socket, received } = await rawConnection(port);
    socket.write(expecting("POST", "/api/v1/banners", "Cookie: consent_session=s\r\n"));
    await vi.waitFor(() => expect(received()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n$/));
    socket.write("x".repeat(50));
    await vi.waitFor(() => expect(received()).toContain('"code":"unauthorized"'));
    socket.destroy();
  });

  it("401 revoked_key and expired_key", async () => {
    const teamId = await createTeam(service, "starter");
    const revoked = await mintKey(service, teamId);
    const { admin, auth } = operator(service);
    await admin.revokeApiKey({ id: revoked.id }, auth);
    const expiring = await mintKey(service, teamId, { expiresAt: new Date(now + 60_000) });
    now += 120_000;
    const headers = { "x-forwarded-for": "10.2.0.1" };
    const revokedResult = await http(service, "GET", "/api/v1/banners", {
      key: revoked.key,
      headers,
    });
    const expiredResult = await http(service, "GET", "/api/v1/banners", {
      key: expiring.key,
      headers,
    });
    expect([revokedResult.status, envelopeOf(revokedResult).code]).toEqual([401, "revoked_key"]);
    expect([expiredResult.status, envelopeOf(expiredResult).code]).toEqual([401, "expired_key"]);
  });

  it("401 carries a Bearer challenge, invalid_token for a key sent and refused; other errors none", async () => {
    // RFC 9110 15.5.2: a 401 names its challenge; RFC 6750 3 writes it for a bearer token.
    const teamId = await createTeam(service, "professional");
    const revoked = await mintKey(service, teamId);
    const rotated = await mintKey(service, teamId);
    const { admin, auth } = operator(service);
    await admin.revokeApiKey({ id: revoked.id }, auth);
    await admin.rotateApiKey({ id: rotated.id, gracePeriodSeconds: 0 }, auth);
    const cases: [string, string, string, Record<string, string>][] = [
      ["GET", "/api/v1/banners", "unauthorized", {}],
      ["POST", "/api/v1/consent/subjects/resolve", "unauthorized", {}],
      ["GET", "/api/v1/banners", "unauthorized", { cookie: "consent_session=cs_unknown" }],
      [
        "GET",
        "/api/v1/banners",
        "unauthorized",
        { cookie: "consent_session=a; consent_session=b" },
      ],
      ["GET", "/api/v1/banners", "invalid_key", { authorization: "Bearer not-a-key" }],
      ["POST", "/api/v1/consent/subjects/resolve", "invalid_key", { authorization: "Basic x" }],
      ["GET", "/api/v1/banners", "revoked_key", { authorization: `Bearer ${revoked.key}` }],
      ["GET", "/api/v1/banners", "expired_key", { authorization: `Bearer ${rotated.key}` }],
    ];
    for (const [i, [method, path, code, headers]] of cases.entries()) {
      const result = await http(service, method, path, {
        headers: { ...headers, "x-forwarded-for": `10.9.0.${i}` },
        body: method === "POST" ? subject() : undefined,
      });
      const challenge = code === "unauthorized" ? "Bearer" : 'Bearer error="invalid_token"';
      expect([code, result.status, envelopeOf(result).code]).toEqual([code, 401, code]);
      expect([code, result.headers.get("www-authenticate")]).toEqual([code, challenge]);
    }
    const readOnly = await mintKey(service, teamId, { scopes: ["banners:read"] });
    const forbidden = await http(service, "POST", "/api/v1/banners", {
      key: readOnly.key,
      body: {},
    });
    expect([forbidden.status, forbidden.headers.get("www-authenticate")]).toEqual([403, null]);
  });

  it("401 unauthorized: no key (and, for banners, no session)", async () => {
    for (const [method, path] of [
      ["GET", "/api/v1/banners"],
      ["POST", "/api/v1/consent/subjects/resolve"],
    ]) {
      const result = await http(service, method as string, path as string, {
        body: method === "POST" ? subject() : undefined,
      });
      expect(result.status).toBe(401);
      expect(envelopeOf(result).code).toBe("unauthorized");
    }
  });

  it("403 plan_required, missing_scope (naming the scope) and test_key_read_only", async () => {
    const freeTeam = await createTeam(service, "free");
    const free = await mintKey(service, freeTeam);
    const planResult = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: free.key,
      body: subject(),
    });
    expect([planResult.status, envelopeOf(planResult).code]).toEqual([403, "plan_required"]);

    const proTeam = await createTeam(service, "business");
    const readOnly = await mintKey(service, proTeam, { scopes: ["banners:read"] });
    const scopeResult = await http(service, "POST", "/api/v1/banners", {
      key: readOnly.key,
      body: { name: "x" },
    });
    expect([scopeResult.status, envelopeOf(scopeResult).code]).toEqual([403, "missing_scope"]);
    expect(envelopeOf(scopeResult).error).toContain("banners:write");

    const testKey = await mintKey(service, proTeam, { environment: "test" });
    const testResult = await http(service, "POST", "/api/v1/banners", {
      key: testKey.key,
      body: { name: "x" },
    });
    expect([testResult.status, envelopeOf(testResult).code]).toEqual([403, "test_key_read_only"]);
    for (const result of [planResult, scopeResult, testResult])
      expect(result.headers.get("x-ratelimit-limit")).toBeNull();
  });

  it("404 not_found: unknown public Banner ID, unknown banner id, subject not found", async () => {
    const unknownBanner = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: { bannerId: "00000000-0000-4000-8000-000000000000", subjectId: "x" },
    });
    expect([unknownBanner.status, envelopeOf(unknownBanner).code]).toEqual([404, "not_found"]);
    const unknownId = await http(
      service,
      "GET",
      "/api/v1/banners/00000000-0000-4000-8000-000000000000",
      { key },
    );
    expect([unknownId.status, envelopeOf(unknownId).code]).toEqual([404, "not_found"]);
    const noSubject = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: {
        ...subject(),
        subjectId: "never-written",
        baseVersion: 3,
        consentState: consentState(),
      },
    });
    expect([noSubject.status, envelopeOf(noSubject).code]).toEqual([404, "not_found"]);
  });

  it("404 for unversioned and undeployed versions, without version headers", async () => {
    for (const path of ["/api/banners", "/api/v2/banners", "/api/consent/subjects/resolve"]) {
      const result = await http(service, "GET", path, { key });
      expect(result.status).toBe(404);
      expect(result.headers.get("api-version")).toBeNull();
    }
  });

  it("405 with Allow for a method the endpoint does not support", async () => {
    const result = await http(service, "DELETE", "/api/v1/banners", { key });
    expect(result.status).toBe(405);
    expect(result.headers.get("allow")).toBe("GET, POST, HEAD");
    expect(result.headers.get("api-version")).toBe("v1");
    expect(envelopeOf(result).error).toMatch(/DELETE/);
    const state = await http(service, "GET", "/api/v1/consent/subjects/state", { key });
    expect([state.status, state.headers.get("allow")]).toEqual([405, "PUT, DELETE"]);
    const trace = await rawHttp(service, "TRACE", "/api/v1/consent/subjects/resolve");
    expect([trace.status, trace.headers.get("allow")]).toEqual([405, "POST"]);
    expect(JSON.parse(trace.text).data.code).toBe("method_not_allowed");
  });

  it("a malformed Content-Type or a QUERY without one changes no answer: never 415 or 400 ahead of 401, 404 and 405", async () => {
    const cases = [
      // [method, path, Content-Type, the answer without any body]
      ["POST", "/api/v1/consent/subjects/resolve", "json", 401, "unauthorized"],
      ["POST", "/api/v1/banners", "application/json, text/plain", 401, "unauthorized"],
      ["POST", "/api/v1/health", ";;;", 405, "method_not_allowed"],
      ["DELETE", "/api/v1/nope", "a/b/c", 404, "not_found"],
      ["QUERY", "/api/v1/banners", undefined, 405, "method_not_allowed"],
      ["QUERY", "/api/v1/nope", undefined, 404, "not_found"],
      ["QUERY", "/nope", undefined, 404, "not_found"],
      ["POST", "/nope", "json", 404, "not_found"],
      ["POST", "/loader/nope.js", "json", 405, "method_not_allowed"],
    ] as const;
    for (const [method, path, contentType, status, code] of cases) {
      // Framed: Node's client sends a DELETE's body without a length, which makes it the start
      // of a next request on the connection, one that cannot be read.
      const headers: Record<string, string> = { "content-length": "2" };
      if (contentType) headers["content-type"] = contentType;
      const result = await rawHttp(service, method, path, headers, "{}");
      const body = JSON.parse(result.text);
      expect([method, path, result.status, body.data?.code ?? body.code]).toEqual([
        method,
        path,
        status,
        code,
      ]);
    }
    // With a key, a malformed Content-Type is read as any other body.
    const resolved = await rawHttp(
      service,
      "POST",
      "/api/v1/consent/subjects/resolve",
      { authorization: `Bearer ${key}`, "content-type": "json" },
      JSON.stringify({ bannerId: publicId, subjectId: "user-ct" }),
    );
    expect([resolved.status, JSON.parse(resolved.text).data.found]).toEqual([200, false]);
  });

  it("404 in the envelope for a path the router cannot read, never the framework's text", async () => {
    for (const path of [
      "/api/v1/banners/%zz",
      `/api/v1/banners/${"a".repeat(101)}`,
      "/api/v1/webhooks/%E0%A4%A",
    ]) {
      const result = await rawHttp(service, "GET", path, { authorization: `Bearer ${key}` });
      expect([path, result.status]).toEqual([path, 404]);
      expect(result.headers.get("api-version")).toBe("v1");
      expect(result.headers.get("api-supported-versions")).toBe("v1");
      const body = JSON.parse(result.text);
      expect(body).toMatchObject({ data: { code: "not_found" }, version: "v1" });
      expect(result.text).not.toMatch(/FST_|valid url component|max param/);
    }
  });

  it("400 invalid_request for a Host or an Authorization header given twice: which one counts would be a guess", async () => {
    const other = (await mintKey(service, await createTeam(service))).key;
    // Raw name-value pairs: Node's client then adds no Host of its own.
    const host = new URL(service.gatewayUrl).host;
    const cases = [
      [
        "Authorization",
        ["Host", host, "Authorization", `Bearer ${key}`, "Authorization", `Bearer ${other}`],
      ],
      ["Host", ["Host", host, "Host", "elsewhere.example", "Authorization", `Bearer ${key}`]],
    ] as const;
    for (const [name, headers] of cases) {
      const result = await rawHttp(service, "GET", "/api/v1/banners", [...headers]);
      expect([name, result.status]).toEqual([name, 400]);
      expect(result.headers.get("api-version")).toBe("v1");
      expect(JSON.parse(result.text)).toEqual({
        data: {
          error: `The request carries more than one ${name} header`,
          code: "invalid_request",
        },
        version: "v1",
      });
    }
    // Once each: answered as ever.
    const once = await rawHttp(service, "GET", "/api/v1/banners", [
      "Host",
      host,
      "Authorization",
      `Bearer ${key}`,
    ]);
    expect(once.status).toBe(200);
  });

  it("400 invalid_request for a Host given twice outside /api/v1 too, in each route family's shape", async () => {
    const twice = ["Host", new URL(service.gatewayUrl).host, "Host", "elsewhere.example"];
    const message = "The request carries more than one Host header";
    // The log route (decisions §5), a choice it would otherwise store.
    const log = await rawHttp(
      service,
      "POST",
      "/api/consent/log",
      [...twice, "Origin", "https://shop.example.com", "Content-Type", "application/json"],
      JSON.stringify(aChoice(publicId)),
    );
    expect([log.status, JSON.parse(log.text)]).toEqual([
      400,
      { success: false, error: message, code: "invalid_request" },
    ]);
    expect(log.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    // The loader and a path nothing serves: the plain shape.
    for (const path of [`/loader/${publicId}.js`, "/api/banners"]) {
      const plain = await rawHttp(service, "GET", path, [...twice]);
      expect([path, plain.status, JSON.parse(plain.text)]).toEqual([
        path,
        400,
        { error: message, code: "invalid_request" },
      ]);
    }
    // The preferences page: a page, never JSON.
    const page = await rawHttp(service, "GET", "/preferences/not-a-token", [...twice]);
    expect([page.status, page.headers.get("content-type")]).toEqual([
      400,
      "text/html; charset=utf-8",
    ]);
  });

  it("404 quotes a long unknown path cut to 500 characters, inside and outside /api/v1/", async () => {
    for (const prefix of ["/api/v1/", "/"]) {
      const result = await rawHttp(service, "GET", `${prefix}${"x".repeat(5_000)}`);
      expect(result.status).toBe(404);
      const body = JSON.parse(result.text);
      const message: string = body.data?.error ?? body.error;
      expect(message).toMatch(/^No endpoint at GET \/.*x…$/);
      expect(message).toHaveLength(500);
    }
  });

  it("409 version_conflict with the current snapshot", async () => {
    const first = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...subject(), baseVersion: 0, consentState: consentState() },
    });
    expect(first.status).toBe(200);
    const stale = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...subject(), baseVersion: 0, consentState: consentState({ categories: [] }) },
    });
    expect(stale.status).toBe(409);
    const data = envelopeOf(stale);
    expect(data.code).toBe("version_conflict");
    expect(data.current).toEqual({
      consentState: consentState(),
      protocolVersion: 1,
      version: 1,
      clientUpdatedAt: "2026-11-21T10:00:00.000Z",
      updatedAt: first.body.data.updatedAt,
      expiresAt: first.body.data.expiresAt,
    });
    expect(data.current.found).toBeUndefined();
  });

  it("413 invalid_request: a subject body over 20 KB, after authentication", async () => {
    const big = { ...subject(), padding: "x".repeat(21 * 1024) };
    const result = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: big,
    });
    expect(result.status).toBe(413);
    expect(envelopeOf(result).code).toBe("invalid_request");
    expect(result.headers.get("x-ratelimit-limit")).toBe("500");
    const anonymous = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      body: big,
    });
    expect(anonymous.status).toBe(401);
  });

  it("413 from the 20,481st byte: spec 8's 20 KB is 20,480 bytes of the body as sent", async () => {
    // Two-byte characters: the bound counts the UTF-8 bytes on the wire, not characters. A
    // subject of its own: the file's other tests write user-42, which would be found.
    const reference = { ...subject(), subjectId: "body-boundary" };
    const bodyOf = (bytes: number) => {
      const bare = JSON.stringify({ ...reference, padding: "" });
      const room = bytes - Buffer.byteLength(bare);
      const padding = "é".repeat(Math.floor(room / 2)) + "x".repeat(room % 2);
      const body = JSON.stringify({ ...reference, padding });
      expect(Buffer.byteLength(body)).toBe(bytes);
      return body;
    };
    const resolve = (body: string) =>
      http(service, "POST", "/api/v1/consent/subjects/resolve", { key, body });
    const within = await resolve(bodyOf(20_480));
    expect([within.status, within.body]).toEqual([200, { data: { found: false }, version: "v1" }]);
    const over = await resolve(bodyOf(20_481));
    expect([over.status, envelopeOf(over)]).toEqual([
      413,
      { error: "Request body exceeds 20 KB", code: "invalid_request" },
    ]);
  });

  it("429 rate_limited with Retry-After once a free key's 50 requests are spent", async () => {
    const teamId = await createTeam(service, "free");
    const free = await mintKey(service, teamId);
    for (let i = 0; i < 50; i++) {
      expect((await http(service, "GET", "/api/v1/banners", { key: free.key })).status).toBe(200);
    }
    const limited = await http(service, "GET", "/api/v1/banners", { key: free.key });
    expect(limited.status).toBe(429);
    expect(envelopeOf(limited)).toMatchObject({
      code: "rate_limited",
      error: expect.stringMatching(/rate limit/i),
    });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.headers.get("x-ratelimit-limit")).toBe("50");
    expect(limited.headers.get("x-ratelimit-remaining")).toBe("0");
  });

  it("503 identity_unavailable when subject hashing has no key", async () => {
    const degraded = await startTestService({ gateway: true, identityKeys: [] });
    try {
      const teamId = await createTeam(degraded, "enterprise");
      const { key: degradedKey } = await mintKey(degraded, teamId);
      const banner = await createBanner(degraded, degradedKey);
      const result = await http(degraded, "POST", "/api/v1/consent/subjects/resolve", {
        key: degradedKey,
        body: { bannerId: banner.publicId, subjectId: "x" },
      });
      expect(result.status).toBe(503);
      expect(envelopeOf(result).code).toBe("identity_unavailable");
      expect(result.headers.get("x-ratelimit-limit")).toBe("5000");
      // No key returns without the operator: clients are told to come back in minutes.
      expect(result.headers.get("retry-after")).toBe("300");
      const subjects = createClient(
        SubjectService,
        createGrpcTransport({ baseUrl: degraded.daemonUrl }),
      );
      const refused = await subjects
        .resolveSubject(
          { bannerId: banner.publicId, subjectId: "x" },
          { headers: { authorization: `Bearer ${degradedKey}` } },
        )
        .catch((error: unknown) => ConnectError.from(error));
      expect(refused).toMatchObject({ code: Code.Unavailable });
      expect((refused as ConnectError).metadata.get("retry-after")).toBe("300");
      // The health service says so of SubjectService by name; the daemon and store serve.
      const health = createClient(Health, createGrpcTransport({ baseUrl: degraded.daemonUrl }));
      const statusOf = async (service: string) => (await health.check({ service })).status;
      expect(await statusOf(SubjectService.typeName)).toBe(ServingStatus.NOT_SERVING);
      expect(await statusOf("")).toBe(ServingStatus.SERVING);
      expect(await statusOf(BannerService.typeName)).toBe(ServingStatus.SERVING);
    } finally {
      await degraded.close();
    }
  });

  it("500 internal_error without internal text when the store fails underneath", async () => {
    const broken = await startTestService({ gateway: true });
    try {
      const teamId = await createTeam(broken, "professional");
      const { key: brokenKey } = await mintKey(broken, teamId);
      await broken.store.close();
      const result = await http(broken, "GET", "/api/v1/banners", { key: brokenKey });
      expect(result.status).toBe(500);
      expect(envelopeOf(result)).toEqual({
        error: "Internal server error",
        code: "internal_error",
      });
      expect(result.text).not.toMatch(/lmdb|Error:|at /i);
      // Over gRPC, the same machine code in the ErrorInfo detail (decisions §7), nothing more.
      const banners = createClient(
        BannerService,
        createGrpcTransport({ baseUrl: broken.daemonUrl }),
      );
      expect(
        await failureOf(
          banners.listBanners({}, { headers: { authorization: `Bearer ${brokenKey}` } }),
        ),
      ).toEqual({
        code: Code.Internal,
        errorCode: "internal_error",
        message: "internal error",
        retryAfter: null,
      });
    } finally {
      await broken.close().catch(() => undefined);
    }
  });

  it("keeps keyId in use (sanity: the main key still works)", async () => {
    expect(keyId).toBeTruthy();
    expect((await http(service, "GET", "/api/v1/banners", { key })).status).toBe(200);
  });
});
