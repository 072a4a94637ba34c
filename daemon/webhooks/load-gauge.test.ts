import { setTimeout as sleep } from "node:timers/promises";
import type { UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { LoadGauge } from "#daemon/webhooks/load-gauge.js";

/** Keeps the event loop busy for `ms`, serving `calls` calls through the gauge's interceptor. */
async function work(gauge: LoadGauge, ms: number, calls: number) {
  const call = gauge.interceptor(async () => ({}) as UnaryResponse);
  const until = performance.now() + ms;
  for (let i = 0; i < calls; i++) await call({} as UnaryRequest);
  while (performance.now() < until) {
    // busy: the loop runs no other task meanwhile
  }
}

describe("LoadGauge", () => {
  it("is busy while the loop is saturated by calls, and not once they stop", async () => {
    const gauge = new LoadGauge();
    await work(gauge, 150, 100);
    expect(gauge.busy()).toBe(true);
    // Within a sample the verdict stands; the next sample sees an idle loop.
    expect(gauge.busy()).toBe(true);
    await sleep(150);
    expect(gauge.busy()).toBe(false);
  });

  it("is not busy when the loop is busy without calls (the dispatcher catching up)", async () => {
    const gauge = new LoadGauge();
    await work(gauge, 150, 0);
    expect(gauge.busy()).toBe(false);
  });

  it("is not busy when calls come but leave the loop mostly idle", async () => {
    const gauge = new LoadGauge();
    const call = gauge.interceptor(async () => ({}) as UnaryResponse);
    for (let i = 0; i < 30; i++) {
      await call({} as UnaryRequest);
      await sleep(5);
    }
    expect(gauge.busy()).toBe(false);
  });
});
