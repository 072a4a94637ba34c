import { afterEach, describe, expect, it, vi } from "vitest";
import { http } from "#test/support/api.js";
import { holdStoreCalls } from "#test/support/held-store-calls.js";
import { startTestService } from "#test/support/service.js";

const UNAVAILABLE = { data: { status: "unavailable" }, version: "v1" };
const OUTAGE = "the daemon could not be reached or has not answered: requests are answered 503";

/**
 * The gateway's interval between outage lines, shortened from REPEATED_FAILURE_LOG_MS (10 s): long
 * enough that a second round of probes, 2 s after the first round's warning, falls within it on a
 * loaded machine too.
 */
const INTERVAL_MS = 6_000;

/**
 * GET /api/v1/health while the daemon is up but its store has stopped answering (spec 4.1,
 * decisions §6): each probe is answered 503 "unavailable" once its 2 s deadline passes, in one
 * process and split alike, and the gateway's log tells the probes as the outage they are
 * (unreachable-log.ts), not one line each.
 */
describe("health checks while the daemon's store stalls", { timeout: 40_000 }, () => {
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A service whose store's pings are held until the test ends, with its warnings. */
  async function stalledService() {
    const logs: Record<string, unknown>[] = [];
    const service = await startTestService({
      gateway: true,
      onLog: (entry) => logs.push(entry),
      repeatedFailureLogMs: INTERVAL_MS,
    });
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

  // Regression: every probe past its deadline logged a warning of its own, "health check
  // failed", so a load balancer probing every second flooded the log for as long as the stall.
  it("logs the probes past their deadline as one warning at once and one counting the rest an interval on", async () => {
    const { service, logs, pings } = await stalledService();
    // A load balancer's probes, three at a time.
    const answers = [];
    for (let round = 0; round < 2; round++) {
      answers.push(
        ...(await Promise.all([1, 2, 3].map(() => http(service, "GET", "/api/v1/health")))),
      );
    }
    expect(answers.map((answer) => [answer.status, answer.body])).toEqual(
      Array(6).fill([503, UNAVAILABLE]),
    );
    expect(pings.calls).toBe(6);
    const outage = () => logs.filter((entry) => entry.msg === OUTAGE);
    expect(outage()).toMatchObject([{ level: 40, failedRequests: 1 }]);
    expect(outage()[0]?.cause).toMatch(/^\[deadline_exceeded\] /);
    const warnedAt = outage()[0]?.time as number;

    // The five held back are told once the interval is over, counted, though no probe follows.
    await vi.waitFor(() => expect(outage()).toHaveLength(2), {
      timeout: INTERVAL_MS + 3_000,
      interval: 100,
    });
    expect(outage()[1]).toMatchObject({ level: 40, failedRequests: 5 });
    expect((outage()[1]?.time as number) - warnedAt).toBeGreaterThanOrEqual(INTERVAL_MS - 100);
    // No other warning, from the gateway or the daemon.
    expect(logs.filter((entry) => Number(entry.level) >= 40)).toEqual(outage());
  });
});
