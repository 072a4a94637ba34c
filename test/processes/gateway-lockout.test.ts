import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it, vi } from "vitest";
import { createTeam, http, mintKey, operator } from "#test/support/api.js";
import {
  DAEMON_URL,
  endpoints,
  freePort,
  logLines,
  PROGRAMS,
  STANDALONE_GATEWAY_URL,
  startProgram,
  useProgramRoot,
} from "#test/support/processes.js";
import type { TestService } from "#test/support/service.js";

const MINUTE_MS = 60_000;
const TOKEN_BEFORE = "operator-token-the-gateways-started-with-0001";
const TOKEN_AFTER = "operator-token-the-daemon-was-restarted-with-02";
const LOCKOUT_MESSAGE =
  /^Too many failed authentication attempts from this address \(10 a minute\); retry in \d+ seconds?$/;

/** What a stand-alone gateway whose token the daemon at `daemonUrl` refuses says as it stops. */
function refusedTokenLine(daemonUrl: string): string {
  return `consent-gateway: the daemon at ${daemonUrl} refuses this gateway's operator token, so it would ignore the client addresses the gateway relays: give the gateway the daemon's own token (CONSENT_ADMIN_TOKEN, or CONSENT_DATA_DIR set to the daemon's data directory)`;
}

/**
 * spec 8 counts failed attempts in minutes aligned to the clock: a sequence that must end in the
 * minute its failures were counted starts at least `needsMs` (20 s) before that minute ends.
 */
async function earlyInAMinute(needsMs = 20_000): Promise<void> {
  const left = MINUTE_MS - (Date.now() % MINUTE_MS);
  if (left < needsMs) await new Promise((resolve) => setTimeout(resolve, left + 100));
}

/**
 * spec 8 and decisions §2 (the order of checks) across real processes: consentd and stand-alone
 * gateways on one host. A gateway relays its clients' addresses with the operator token, and a
 * client's own failed attempts lock that client out (429); a gateway whose token the daemon does
 * not take is counted by its own address, and a lockout of that address is the gateway's failure.
 *
 * The tests run side by side: each has a daemon (and so its own count of failed attempts), its
 * gateways and a data dir of its own, and spends most of its time waiting for a minute to begin.
 */
describe("failed-authentication lockouts through stand-alone gateways", {
  timeout: 120_000,
  concurrent: true,
}, () => {
  const dirs = useProgramRoot("consent-gateway-lockout-");

  async function startDaemon(dataDir: string, token: string, port: number) {
    const program = startProgram(PROGRAMS.consentd, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_ADMIN_TOKEN: token,
      CONSENT_GRPC_PORT: String(port),
    });
    return { program, url: await program.waitFor(DAEMON_URL) };
  }

  /**
   * A client at `clientIp` behind the gateways of the daemon at `daemonUrl` (first started with
   * TOKEN_BEFORE) with a key minted through the gateway at `gatewayUrl`: its banner list through
   * any of them, and the endpoints of each.
   */
  async function bannerClient(daemonUrl: string, gatewayUrl: string, clientIp: string) {
    const service = (url: string): TestService =>
      endpoints({ daemonUrl, gatewayUrl: url, operatorToken: TOKEN_BEFORE });
    const { key } = await mintKey(service(gatewayUrl), await createTeam(service(gatewayUrl)));
    const banners = (url: string) =>
      http(service(url), "GET", "/api/v1/banners", {
        key,
        headers: { "x-forwarded-for": clientIp },
      });
    return { service, banners };
  }

  async function startGateway(daemonUrl: string, token: string) {
    const program = startProgram(PROGRAMS.gateway, {
      CONSENT_ADMIN_TOKEN: token,
      CONSENT_DAEMON_URL: daemonUrl,
      CONSENT_TRUST_PROXY: "127.0.0.1",
    });
    return { program, url: await program.waitFor(STANDALONE_GATEWAY_URL) };
  }

  it("answers a REST client's own failed attempts 429 with the lockout's words, also a client at the gateway's own address, and logs nothing of it", async () => {
    const port = await freePort();
    const daemon = await startDaemon(dirs.join("clients"), TOKEN_BEFORE, port);
    const gateway = await startGateway(daemon.url, TOKEN_BEFORE);
    const service = endpoints({
      daemonUrl: daemon.url,
      gatewayUrl: gateway.url,
      operatorToken: TOKEN_BEFORE,
    });
    const { key } = await mintKey(service, await createTeam(service));
    const banners = (bearer: string, headers: Record<string, string> = {}) =>
      http(service, "GET", "/api/v1/banners", { key: bearer, headers });

    await earlyInAMinute();
    // A client behind the trusted proxy (X-Forwarded-For), then one at the gateway's own address
    // (127.0.0.1, as the daemon sees the gateway's connection): each its own count.
    const clients: Record<string, string>[] = [{ "x-forwarded-for": "192.0.2.10" }, {}];
    for (const headers of clients) {
      for (let attempt = 0; attempt < 10; attempt++) {
        const refused = await banners(`ck_live_guess${attempt}`, headers);
        expect([refused.status, refused.body.data.code]).toEqual([401, "invalid_key"]);
      }
      for (const bearer of ["ck_live_guess10", key]) {
        const limited = await banners(bearer, headers);
        expect(limited.status).toBe(429);
        expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(limited.body.data).toEqual({
          code: "rate_limited",
          error: expect.stringMatching(LOCKOUT_MESSAGE),
        });
      }
    }
    // Another client is not held back by theirs.
    const other = await banners(key, { "x-forwarded-for": "192.0.2.11" });
    expect(other.status).toBe(200);
    expect((await http(service, "GET", "/api/v1/health")).status).toBe(200);
    expect(logLines(gateway.program)).toEqual([]);
  });

  it("answers 503 with Retry-After 300, not 429, when a gateway left with an old token finds its address locked out by another one's failures, and says why in one warning; one started then with that token stops as for its refusal", async () => {
    const dataDir = dirs.join("old-token");
    const port = await freePort();
    const first = await startDaemon(dataDir, TOKEN_BEFORE, port);
    // Two gateways on this host, both started with the daemon's token of the time.
    const [a, b] = await Promise.all([
      startGateway(first.url, TOKEN_BEFORE),
      startGateway(first.url, TOKEN_BEFORE),
    ]);
    const { service, banners } = await bannerClient(first.url, a.url, "192.0.2.20");
    expect((await banners(a.url)).status).toBe(200);

    // The daemon comes back with another admin token: neither gateway's is its own any more.
    expect(await first.program.stop()).toBe(0);
    await startDaemon(dataDir, TOKEN_AFTER, port);

    await earlyInAMinute();
    // Gateway B's calls are refused for its token, each a failed attempt of this host's address,
    // until the address is locked out.
    for (let call = 0; call < 12; call++) expect((await banners(b.url)).status).toBe(503);

    // Gateway A has seen no refusal of its own: its calls meet the lockout of its address, which
    // is no fault of its client's.
    for (let call = 0; call < 3; call++) {
      const answer = await banners(a.url);
      expect(answer.status).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("300");
      expect(answer.body).toEqual({
        data: {
          code: "unavailable",
          error: "The service is temporarily unavailable; retry later",
        },
        version: "v1",
      });
    }
    const health = await http(service(a.url), "GET", "/api/v1/health");
    expect([health.status, health.body.data]).toEqual([503, { status: "unavailable" }]);

    const warnings = logLines(a.program);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40 });
    expect(warnings[0]?.msg).toContain(
      "the daemon locks this gateway's address out for too many failed authentication attempts",
    );
    expect(warnings[0]?.msg).toContain(
      "Restart the gateway with the daemon's current token (CONSENT_ADMIN_TOKEN, or CONSENT_DATA_DIR set to the daemon's data directory)",
    );

    // A gateway started meanwhile with that token stops as for the token's refusal: the daemon
    // answers its own token whatever the lockout, so the lockout stands in for the refusal.
    const c = startProgram(PROGRAMS.gateway, {
      CONSENT_ADMIN_TOKEN: TOKEN_BEFORE,
      CONSENT_DAEMON_URL: first.url,
    });
    expect(await c.exitWithin(20_000)).toBe(1);
    expect(c.stderr().trim()).toBe(refusedTokenLine(first.url));
    expect(c.stdout()).not.toContain("listening");
  });

  it("serves again, its health ok, once the daemon takes its token back, though its host's address stays locked out and another gateway there is refused", async () => {
    const dataDir = dirs.join("token-back");
    const port = await freePort();
    const before = await startDaemon(dataDir, TOKEN_BEFORE, port);
    const a = await startGateway(before.url, TOKEN_BEFORE);
    const { service, banners } = await bannerClient(before.url, a.url, "192.0.2.30");
    const health = async (gatewayUrl: string) => {
      const answer = await http(service(gatewayUrl), "GET", "/api/v1/health");
      return [answer.status, answer.body.data];
    };

    // The daemon comes back with another admin token, which gateway B starts with. A's calls are
    // refused for its token, each a failed attempt of this host's address, until it is locked out.
    expect(await before.program.stop()).toBe(0);
    const after = await startDaemon(dataDir, TOKEN_AFTER, port);
    const b = await startGateway(after.url, TOKEN_AFTER);
    await earlyInAMinute(35_000);
    for (let call = 0; call < 12; call++) expect((await banners(a.url)).status).toBe(503);
    expect(await health(a.url)).toEqual([503, { status: "unavailable" }]);

    // The daemon comes back with A's token, the lockout (kept in its store) still on: now B's
    // token is the wrong one.
    expect(await after.program.stop()).toBe(0);
    await startDaemon(dataDir, TOKEN_BEFORE, port);
    expect((await banners(b.url)).status).toBe(503);
    // The daemon takes A's token and judges its calls by its client's address, and A learns so
    // within its 10 s recheck: its health is ok again.
    expect((await banners(a.url)).status).toBe(200);
    await vi.waitFor(async () => expect(await health(a.url)).toEqual([200, { status: "ok" }]), {
      timeout: 12_000,
      interval: 250,
    });
    expect(logLines(a.program).map(({ level }) => level)).toEqual([50]);
    // A gateway started now has its token accepted at start-up, and warns of nothing.
    const c = await startGateway(before.url, TOKEN_BEFORE);
    expect(await health(c.url)).toEqual([200, { status: "ok" }]);
    expect((await banners(c.url)).status).toBe(200);
    expect(logLines(c.program)).toEqual([]);

    // All the while, this host's own address is locked out: even the operator token is refused.
    const { admin, auth } = operator(service(a.url));
    const direct = await admin.listTeams({}, auth).catch((error: unknown) => error);
    expect(direct).toBeInstanceOf(ConnectError);
    expect((direct as ConnectError).code).toBe(Code.ResourceExhausted);
  });
});
