import { afterEach, describe, expect, it } from "vitest";
import { http } from "#test/support/api.js";
import { holdStoreCalls } from "#test/support/held-store-calls.js";
import { startTestService } from "#test/support/service.js";

const UNAVAILABLE = { data: { status: "unavailable" }, version: "v1" };

/**
 * GET /api/v1/health while the daemon is up but its store has stopped answering (spec 4.1,
 * decisions §6): each probe is answered 503 "unavailable" once its 2 s deadline passes, in one
 * process and split alike.
 */
describe("health checks while the daemon's store stalls", { timeout: 40_000 }, () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A service whose store's pings are held until the test ends, with its warnings. */
  async function stalledService() {
    const logs: Record<string, unknown>[] = [];
    const service = await startTestService({ gateway: true, onLog: (entry) => logs.push(entry) });
    cleanups.push(() => service.close());
    const pings = holdStoreCalls(service.store, "ping");
    cleanups.push(() => pings.release());
    return { service, logs, pings };
  }

  // Regression: in one process (`npm start`) the deadline was not kept: a probe waited for as
  // long as the store stalled, never answered 503.
  it("answers each probe 503 unavailable at its deadline, and 200 ok once the store answers", async () => {
    const { service, pings } = await stalledService();
    const started = performance.now();
    const stalled = await http(service, "GET", "/api/v1/health");
    expect([stalled.status, stalled.body]).toEqual([503, UNAVAILABLE]);
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(pings.calls).toBe(1);

    pings.release();
    const ok = await http(service, "GET", "/api/v1/health");
    expect([ok.status, ok.body]).toEqual([200, { data: { status: "ok" }, version: "v1" }]);
  });
});
