import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import {
  endpoints,
  operatorTokenOf,
  PROGRAMS,
  ROOT,
  STANDALONE_GATEWAY_URL,
  startDaemon,
  startProgram,
  useProgramRoot,
} from "#test/support/processes.js";
import type { TestService } from "#test/support/service.js";

const WINDOW = 15 * 60_000;

/** Decisions §1: consentd and the gateway as separate processes, several of each on one store. */
describe("split mode and a shared data directory", () => {
  const dirs = useProgramRoot("consent-split-");

  /** A stand-alone gateway; the admin token comes from the shared data dir, as in production. */
  const startGateway = async (dataDir: string, daemonUrl: string) => {
    const program = startProgram(PROGRAMS.gateway, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_DAEMON_URL: daemonUrl,
    });
    return { program, url: await program.waitFor(STANDALONE_GATEWAY_URL) };
  };
  const serviceOf = async (dataDir: string, daemonUrl: string, gatewayUrl: string) =>
    endpoints({
      daemonUrl,
      gatewayUrl,
      operatorToken: await operatorTokenOf(dataDir),
    });

  it("a key minted over gRPC works through the stand-alone gateway, and both exit 0 on SIGTERM; a gateway with another token does not start", async () => {
    const dataDir = dirs.join("split");
    const daemon = await startDaemon(dataDir);
    expect(daemon.program.stdout()).toContain(
      `REST gateway           not in this process; start one: CONSENT_DATA_DIR=${dataDir} CONSENT_DAEMON_URL=${daemon.url} CONSENT_HTTP_PORT=0 node ${path.join(ROOT, PROGRAMS.gateway)}`,
    );
    const gateway = await startGateway(dataDir, daemon.url);
    expect(gateway.program.stdout()).toContain(`daemon at ${daemon.url}`);
    const service = await serviceOf(dataDir, daemon.url, gateway.url);

    const health = await http(service, "GET", "/api/v1/health");
    expect([health.status, health.body]).toEqual([200, { data: { status: "ok" }, version: "v1" }]);
    const { key } = await mintKey(service, await createTeam(service, "professional"));
    const { id, publicId } = await createBanner(service, key, { name: "Split shop" });
    const listed = await http(service, "GET", "/api/v1/banners", { key });
    expect(listed.body.data.banners.map((b: { id: string }) => b.id)).toEqual([id]);

    const subject = { bannerId: publicId, subjectId: "split-subject-1" };
    const put = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...subject, baseVersion: 0, consentState: consentState() },
    });
    expect([put.status, put.body.data.version]).toEqual([200, 1]);
    const resolved = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: subject,
    });
    expect(resolved.body.data).toMatchObject({
      found: true,
      version: 1,
      consentState: consentState(),
    });

    // A gateway with another token would serve, but its relayed client addresses would be
    // ignored: every REST client would share one address for the per-IP limits and lockout.
    const stranger = startProgram(PROGRAMS.gateway, {
      CONSENT_ADMIN_TOKEN: "a-token-that-is-not-the-daemon-s",
      CONSENT_DAEMON_URL: daemon.url,
    });
    expect(await stranger.exitWithin(20_000)).toBe(1);
    const message = stranger.stderr().trim();
    expect(message.split("\n")).toHaveLength(1);
    expect(message).toContain(`the daemon at ${daemon.url} refuses this gateway's operator token`);
    expect(stranger.stdout()).not.toContain("listening");

    expect(await gateway.program.stop()).toBe(0);
    expect(await daemon.program.stop()).toBe(0);
  });

  describe("two daemons and two gateways on one data directory", () => {
    let a: TestService;
    let b: TestService;

    beforeAll(async () => {
      const dataDir = dirs.join("shared");
      // The first daemon creates the secrets; the second finds them.
      const daemon1 = await startDaemon(dataDir);
      const daemon2 = await startDaemon(dataDir);
      const [gatewayA, gatewayB] = await Promise.all([
        startGateway(dataDir, daemon1.url),
        startGateway(dataDir, daemon2.url),
      ]);
      a = await serviceOf(dataDir, daemon1.url, gatewayA.url);
      b = await serviceOf(dataDir, daemon2.url, gatewayB.url);
    });

    it("a banner created through gateway A is listed through gateway B", async () => {
      const { key } = await mintKey(b, await createTeam(a, "professional"));
      const { id, publicId } = await createBanner(a, key, { name: "Made through A" });
      const throughA = await http(a, "GET", "/api/v1/banners", { key });
      const throughB = await http(b, "GET", "/api/v1/banners", { key });
      expect(throughB.status).toBe(200);
      expect(throughB.body.data.banners).toEqual(throughA.body.data.banners);
      expect(throughB.body.data.banners).toMatchObject([{ id, publicId, name: "Made through A" }]);
    });

    it("a subject written through A is resolved through B, and versions advance across both", async () => {
      const { key } = await mintKey(a, await createTeam(b, "business"));
      const { publicId } = await createBanner(b, key);
      const subject = { bannerId: publicId, subjectId: "shared-subject-1", namespace: "shop" };
      const state = (overrides: Record<string, unknown> = {}) => consentState(overrides);
      const put = (service: TestService, baseVersion: number, body = state()) =>
        http(service, "PUT", "/api/v1/consent/subjects/state", {
          key,
          body: { ...subject, baseVersion, consentState: body },
        });
      const resolve = (service: TestService) =>
        http(service, "POST", "/api/v1/consent/subjects/resolve", { key, body: subject });

      expect((await put(a, 0)).body.data.version).toBe(1);
      expect((await resolve(b)).body.data).toMatchObject({ found: true, version: 1 });
      const second = state({ categories: ["necessary"], acceptType: "necessary" });
      expect((await put(b, 1, second)).body.data.version).toBe(2);
      expect((await resolve(a)).body.data).toMatchObject({ version: 2, consentState: second });

      const stale = await put(a, 1);
      expect(stale.status).toBe(409);
      expect(stale.body.data).toMatchObject({
        code: "version_conflict",
        current: { version: 2, consentState: second },
      });
    });

    it("shares rate-limit counters: a free key's 30 requests through A and 20 through B use up its 50", async () => {
      const { key } = await mintKey(b, await createTeam(a, "free"));
      // All 51 requests must fall in one clock-aligned window (decisions §2).
      const left = WINDOW - (Date.now() % WINDOW);
      if (left < 30_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
      const list = (service: TestService) => http(service, "GET", "/api/v1/banners", { key });

      for (let i = 0; i < 30; i++) expect((await list(a)).status).toBe(200);
      const firstThroughB = await list(b);
      expect(firstThroughB.status).toBe(200);
      expect(firstThroughB.headers.get("x-ratelimit-remaining")).toBe("19");
      for (let i = 0; i < 19; i++) expect((await list(b)).status).toBe(200);

      const limited = await list(b);
      expect(limited.status).toBe(429);
      expect(limited.body.data.code).toBe("rate_limited");
      expect(limited.headers.get("x-ratelimit-remaining")).toBe("0");
      expect((await list(a)).status).toBe(429);
    }, 60_000);
  });
});
