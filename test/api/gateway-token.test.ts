import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  const logged: Record<string, unknown>[] = [];
  beforeAll(async () => {
    daemon = await startTestService();
    gateway = await startGateway({
      config: daemon.config,
      transport: createDaemonTransport({ baseUrl: daemon.daemonUrl }),
      operatorToken: `${daemon.operatorToken}-before-it-changed`,
      inProcess: false,
      logger: pino({ level: "warn" }, { write: (line: string) => logged.push(JSON.parse(line)) }),
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await daemon?.close();
  });

  it("answers 503 unavailable, logs why once, and its health says unavailable", async () => {
    const { key } = await mintKey(daemon, await createTeam(daemon));
    const health = await fetch(`${gateway.url}/api/v1/health`);
    expect(health.status).toBe(200);

    for (let call = 0; call < 3; call++) {
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

    const after = await fetch(`${gateway.url}/api/v1/health`);
    expect(after.status).toBe(503);
    expect(await after.json()).toMatchObject({ data: { status: "unavailable" } });
  });
});
