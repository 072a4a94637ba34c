import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { startGateway } from "#gateway/main.js";
import { createTeam, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * A stand-alone gateway checks its operator token with the daemon when it starts; a daemon whose
 * admin token changes afterwards refuses the token on every call. Clients are then told the
 * service is unavailable (503, spec 7), not that their key is wrong; the operator reads why in
 * the gateway's log, once; and the gateway's health says unavailable.
 */
describe("a stand-alone gateway whose operator token the daemon no longer accepts", () => {
  let daemon: TestService;
  const gateways: Awaited<ReturnType<typeof startGateway>>[] = [];
  beforeAll(async () => {
    daemon = await startTestService();
  });
  afterAll(async () => {
    for (const gateway of gateways) await gateway.close();
    await daemon?.close();
  });

  /** A gateway holding the token the daemon had before (start-up's own check is not run here). */
  async function standAloneGateway() {
    const logged: Record<string, unknown>[] = [];
    const gateway = await startGateway({
      config: daemon.config,
      transport: createDaemonTransport({ baseUrl: daemon.daemonUrl }),
      operatorToken: `${daemon.operatorToken}-before-it-changed`,
      inProcess: false,
      logger: pino({ level: "warn" }, { write: (line: string) => logged.push(JSON.parse(line)) }),
    });
    gateways.push(gateway);
    return { url: gateway.url, logged };
  }

  // First: the next test's calls lock the address of every gateway of this test out for a minute.
  it("learns of the refusal from its health checks while it serves no request", async () => {
    const gateway = await standAloneGateway();
    await vi.waitFor(
      async () => expect((await fetch(`${gateway.url}/api/v1/health`)).status).toBe(503),
      { timeout: 5_000, interval: 100 },
    );
  });

  it("answers 503 unavailable past the daemon's lockout of its address, logs why once, and its health says unavailable", async () => {
    const { key } = await mintKey(daemon, await createTeam(daemon));
    const { logged, ...gateway } = await standAloneGateway();
    // 15 calls: past the 10 failed attempts a minute after which the daemon answers the
    // gateway's address 429 (spec 8), which is the gateway's failure too, not the client's.
    for (let call = 0; call < 15; call++) {
      const answer = await fetch(`${gateway.url}/api/v1/banners`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(answer.status).toBe(503);
      expect(await answer.json()).toMatchObject({
        data: {
          code: "unavailable",
          error: "The service is temporarily unavailable; retry later",
        },
      });
    }
    const refusals = logged.filter((entry) => String(entry.msg).includes("operator token"));
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({
      level: 50,
      msg: expect.stringContaining("restart the gateway with the daemon's current token"),
    });
    const health = await fetch(`${gateway.url}/api/v1/health`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ data: { status: "unavailable" } });
  });
});
