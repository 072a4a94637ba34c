import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CallerHeaders } from "#daemon/auth/caller.js";
import { generateApiKey } from "#daemon/keys/api-key-format.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema, LockedOutAddress } from "#gen/consent/v1/errors_pb.js";
import { createTeam, http, mintKey, operator } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

const WINDOW = 15 * 60_000;

/** spec 8 and decisions §2: fixed windows per key and per client IP, and their headers. */
describe("rate limits", () => {
  let service: TestService;
  let now = Date.parse("2026-11-22T12:07:30.000Z");
  const from = (ip: string) => ({ "x-forwarded-for": ip });

  beforeAll(async () => {
    service = await startTestService({
      gateway: true,
      clock: () => new Date(now),
      env: { CONSENT_TRUST_PROXY: "127.0.0.1" },
    });
  });
  afterAll(() => service.close());

  it("sends the key's limit, what is left and the clock-aligned reset in milliseconds", async () => {
    const { key } = await mintKey(service, await createTeam(service, "starter"));
    const first = await http(service, "GET", "/api/v1/banners", { key });
    const second = await http(service, "GET", "/api/v1/banners", { key });
    expect(first.headers.get("x-ratelimit-limit")).toBe("200");
    expect(first.headers.get("x-ratelimit-remaining")).toBe("199");
    expect(second.headers.get("x-ratelimit-remaining")).toBe("198");
    expect(first.headers.get("x-ratelimit-reset")).toBe(
      String(Date.parse("2026-11-22T12:15:00.000Z")),
    );
  });

  // decisions §2: "Plans: `free`, `starter`, `professional`, `business`, `enterprise`, limits as
  // in spec section 8"; spec 8: "Business plan | 2,000".
  it("sends a business key's limit of 2000 requests per window", async () => {
    const { key } = await mintKey(service, await createTeam(service, "business"));
    const result = await http(service, "GET", "/api/v1/banners", { key });
    expect([
      result.status,
      result.headers.get("x-ratelimit-limit"),
      result.headers.get("x-ratelimit-remaining"),
    ]).toEqual([200, "2000", "1999"]);
  });

  it("counts every request of a key, starts over in the next window, and follows a plan change at once", async () => {
    const teamId = await createTeam(service, "free");
    const { key } = await mintKey(service, teamId);
    for (let i = 0; i < 50; i++) await http(service, "GET", "/api/v1/banners", { key });
    const limited = await http(service, "GET", "/api/v1/banners", { key });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBe(450);

    const { admin, auth } = operator(service);
    await admin.setTeamPlan({ id: teamId, plan: "starter" }, auth);
    const upgraded = await http(service, "GET", "/api/v1/banners", { key });
    expect([upgraded.status, upgraded.headers.get("x-ratelimit-limit")]).toEqual([200, "200"]);

    now += WINDOW;
    const next = await http(service, "GET", "/api/v1/banners", { key });
    expect(next.headers.get("x-ratelimit-remaining")).toBe("199");
  });

  it("keeps keys of one team apart (the limit is per key)", async () => {
    const teamId = await createTeam(service, "free");
    const a = await mintKey(service, teamId);
    const b = await mintKey(service, teamId);
    for (let i = 0; i < 51; i++) await http(service, "GET", "/api/v1/banners", { key: a.key });
    expect((await http(service, "GET", "/api/v1/banners", { key: b.key })).status).toBe(200);
  });

  it("limits dashboard sessions to 100 requests per 15 minutes per client IP", async () => {
    const { admin, auth } = operator(service);
    const { token } = await admin.createSession({ teamId: await createTeam(service) }, auth);
    const headers = { cookie: `consent_session=${token}`, ...from("192.0.2.10") };
    for (let i = 0; i < 100; i++)
      expect((await http(service, "GET", "/api/v1/banners", { headers })).status).toBe(200);
    const limited = await http(service, "GET", "/api/v1/banners", { headers });
    expect([
      limited.status,
      limited.body.data.code,
      limited.headers.get("x-ratelimit-limit"),
    ]).toEqual([429, "rate_limited", "100"]);
    const elsewhere = await http(service, "GET", "/api/v1/banners", {
      headers: { ...headers, ...from("192.0.2.11") },
    });
    expect(elsewhere.status).toBe(200);
  });

  it("answers 429 to an IP after 10 failed authentications in a minute, whatever credential it sends next", async () => {
    const { key } = await mintKey(service, await createTeam(service, "enterprise"));
    for (let i = 0; i < 10; i++) {
      const failed = await http(service, "GET", "/api/v1/banners", {
        key: "ck_live_guess",
        headers: from("192.0.2.50"),
      });
      expect(failed.status).toBe(401);
    }
    const blocked = await http(service, "GET", "/api/v1/banners", {
      key,
      headers: from("192.0.2.50"),
    });
    expect([blocked.status, blocked.body.data.code]).toEqual([429, "rate_limited"]);
    // It says why: the key it sent may be fine.
    expect(blocked.body.data.error).toMatch(
      /^Too many failed authentication attempts from this address \(10 a minute\); retry in \d+ seconds?$/,
    );
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(blocked.headers.get("x-ratelimit-limit")).toBeNull();
    // Not an attempt: a request without any credential still learns it needs one.
    const anonymous = await http(service, "GET", "/api/v1/banners", {
      headers: from("192.0.2.50"),
    });
    expect([anonymous.status, anonymous.body.data.code]).toEqual([401, "unauthorized"]);
    expect(
      (await http(service, "GET", "/api/v1/banners", { key, headers: from("192.0.2.51") })).status,
    ).toBe(200);
    now += 60_000;
    expect(
      (await http(service, "GET", "/api/v1/banners", { key, headers: from("192.0.2.50") })).status,
    ).toBe(200);
  });

  it("answers at most 10 failed authentications a minute with their 401, however many arrive at once", async () => {
    const guesses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        http(service, "GET", "/api/v1/banners", {
          key: `ck_live_guess${i}`,
          headers: from("192.0.2.60"),
        }),
      ),
    );
    const statuses = guesses.map((guess) => guess.status);
    expect(statuses.filter((status) => status === 401)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(30);
    now += 60_000;
  });

  it("answers no more credentials of one address at once than its failed attempts left allow, so a burst of guesses learns of 10 at most", async () => {
    const { key } = await mintKey(service, await createTeam(service, "enterprise"));
    // Connections open already (requests without a credential are no attempt), as an attacker's
    // would be: the guesses then arrive together.
    await Promise.all(
      Array.from({ length: 200 }, () =>
        http(service, "GET", "/api/v1/banners", { headers: from("192.0.2.65") }),
      ),
    );
    // Guesses of the right form, each looked up, and the right key among them.
    const sent = Array.from({ length: 200 }, (_, i) => (i === 100 ? key : generateApiKey("live")));
    const answers = await Promise.all(
      sent.map((guess) =>
        http(service, "GET", "/api/v1/banners", { key: guess, headers: from("192.0.2.65") }),
      ),
    );
    const told = answers.filter((answer) => answer.status !== 429).map((answer) => answer.status);
    expect(told).toHaveLength(10);
    expect(told.filter((status) => status === 401).length).toBeGreaterThanOrEqual(9);
    now += 60_000;
    // A client without failures is never held back: its burst is answered in full.
    const burst = await Promise.all(
      Array.from({ length: 30 }, () =>
        http(service, "GET", "/api/v1/banners", { key, headers: from("192.0.2.66") }),
      ),
    );
    expect(burst.map((answer) => answer.status)).toEqual(Array(30).fill(200));
  });

  it("counts wrong operator tokens on the admin service as failed attempts, and then refuses the right one too", async () => {
    const { admin } = operator(service);
    const codeOf = (token: string) =>
      admin.listTeams({}, { headers: { authorization: `Bearer ${token}` } }).then(
        () => "OK",
        (error: unknown) => Code[ConnectError.from(error).code],
      );
    for (let i = 0; i < 10; i++) expect(await codeOf(`guess-${i}`)).toBe("Unauthenticated");
    expect(await codeOf("guess-10")).toBe("ResourceExhausted");
    // The address is refused whatever it sends, the right token included, so a guess learns
    // nothing until the minute is over.
    expect(await codeOf(service.operatorToken)).toBe("ResourceExhausted");
    now += 60_000;
    expect(await codeOf(service.operatorToken)).toBe("OK");
  });

  it("counts a client by its address whatever port a proxy writes beside it, and a forwarded non-address as the proxy", async () => {
    const guess = (forwarded: string) =>
      http(service, "GET", "/api/v1/banners", { key: "ck_live_guess", headers: from(forwarded) });
    for (let i = 0; i < 10; i++) {
      expect((await guess(`192.0.2.60:${40_000 + i}`)).status).toBe(401);
    }
    expect((await guess("192.0.2.60:50000")).status).toBe(429);
    expect((await guess("192.0.2.60")).status).toBe(429);
    for (let i = 0; i < 10; i++) {
      expect((await guess(`[2001:db8::60]:${40_000 + i}`)).status).toBe(401);
    }
    expect((await guess("2001:db8::60")).status).toBe(429);
    for (let i = 0; i < 10; i++) expect((await guess(`not-an-address-${i}`)).status).toBe(401);
    expect((await guess("127.0.0.1")).status).toBe(429); // the proxy's own count
    now += 60_000;
  });

  it("counts a gRPC caller by its socket address unless it relays a client IP with the operator token", async () => {
    const daemon = await startTestService();
    try {
      const banners = createClient(
        BannerService,
        createGrpcTransport({ baseUrl: daemon.daemonUrl }),
      );
      const codeOf = (clientIp: string, gatewayToken: string) =>
        banners
          .listBanners(
            {},
            {
              headers: {
                authorization: "Bearer ck_live_guess",
                [CallerHeaders.clientIp]: clientIp,
                [CallerHeaders.gatewayToken]: gatewayToken,
              },
            },
          )
          .then(
            () => "OK",
            (error: unknown) => Code[ConnectError.from(error).code],
          );
      // A relayed address with a wrong token is ignored: ten guesses from "ten addresses" are ten
      // from this socket's, which is then locked out.
      for (let i = 0; i < 10; i++) {
        expect(await codeOf(`198.51.100.${i}`, "not-the-token")).toBe("Unauthenticated");
      }
      expect(await codeOf("198.51.100.99", "not-the-token")).toBe("ResourceExhausted");
      // With the operator token (a gateway), the relayed address is the one counted.
      expect(await codeOf("198.51.100.99", daemon.operatorToken)).toBe("Unauthenticated");
      // Each lockout says whose address it holds: the caller's own, or the relayed client's.
      for (let i = 0; i < 9; i++) await codeOf("198.51.100.99", daemon.operatorToken);
      const whose = (gatewayToken: string) =>
        banners
          .listBanners(
            {},
            {
              headers: {
                authorization: "Bearer ck_live_guess",
                [CallerHeaders.clientIp]: "198.51.100.99",
                [CallerHeaders.gatewayToken]: gatewayToken,
              },
            },
          )
          .catch((error: unknown) => {
            const info = ConnectError.from(error).findDetails(ErrorInfoSchema)[0];
            return [info?.code, LockedOutAddress[info?.lockedOutAddress ?? 0]];
          });
      expect(await whose("not-the-token")).toEqual(["rate_limited", "CALLER"]);
      expect(await whose(daemon.operatorToken)).toEqual(["rate_limited", "RELAYED_CLIENT"]);
    } finally {
      await daemon.close();
    }
  });

  it("refuses a wrong gateway token as a failed attempt, whatever else the call carries", async () => {
    const daemon = await startTestService();
    try {
      const { key } = await mintKey(daemon, await createTeam(daemon, "professional"));
      const transport = createGrpcTransport({ baseUrl: daemon.daemonUrl });
      const banners = createClient(BannerService, transport);
      const logs = createClient(ConsentLogService, transport);
      const outcome = (call: Promise<unknown>) =>
        call.then(
          () => ["OK"],
          (error: unknown) => {
            const failure = ConnectError.from(error);
            return [Code[failure.code], failure.findDetails(ErrorInfoSchema)[0]?.code];
          },
        );
      const gateway = (token: string) => ({
        [CallerHeaders.clientIp]: "198.51.100.7",
        [CallerHeaders.gatewayToken]: token,
      });
      // A valid key does not carry a wrong gateway token: refused, and counted.
      const withKey = (token: string) =>
        outcome(
          banners.listBanners(
            {},
            { headers: { authorization: `Bearer ${key}`, ...gateway(token) } },
          ),
        );
      expect(await withKey(daemon.operatorToken)).toEqual(["OK"]);
      expect(await withKey("not-the-token")).toEqual(["Unauthenticated", "unauthorized"]);
      // Nor the operator token in Authorization, nor a visitor's call that needs no credential.
      const operatorCall = () =>
        outcome(
          createClient(AdminService, transport).listTeams(
            {},
            {
              headers: {
                authorization: `Bearer ${daemon.operatorToken}`,
                ...gateway("not-the-token"),
              },
            },
          ),
        );
      expect(await operatorCall()).toEqual(["Unauthenticated", "unauthorized"]);
      const visitorCall = () =>
        outcome(logs.recordConsent({}, { headers: gateway("not-the-token") }));
      for (let i = 0; i < 8; i++) {
        expect(await visitorCall()).toEqual(["Unauthenticated", "unauthorized"]);
      }
      // Ten failed attempts from this socket's address: it is locked out, the right key too.
      expect(await visitorCall()).toEqual(["ResourceExhausted", "rate_limited"]);
      expect(
        await outcome(banners.listBanners({}, { headers: { authorization: `Bearer ${key}` } })),
      ).toEqual(["ResourceExhausted", "rate_limited"]);
    } finally {
      await daemon.close();
    }
  });

  it("ignores X-Forwarded-For from a peer that is not a trusted proxy", async () => {
    const untrusting = await startTestService({ gateway: true });
    try {
      for (let i = 0; i < 10; i++) {
        await http(untrusting, "GET", "/api/v1/banners", {
          key: "ck_live_guess",
          headers: from(`203.0.113.${i}`),
        });
      }
      const blocked = await http(untrusting, "GET", "/api/v1/banners", {
        key: "ck_live_guess",
        headers: from("203.0.113.99"),
      });
      expect(blocked.status).toBe(429);
    } finally {
      await untrusting.close();
    }
  });
});
