import { performance } from "node:perf_hooks";
import type { Interceptor } from "@connectrpc/connect";

/** What the webhook dispatcher asks before its passes: is this process saturated by calls? */
export interface Load {
  busy(): boolean;
}

/** A sample covers at least this long; busy() between samples repeats the last verdict. */
const SAMPLE_MS = 100;
/** The event loop was busy at least this share of the sample... */
const BUSY_UTILIZATION = 0.5;
/** ...while the daemon answered calls (visitors' posts, API requests) at least this fast. */
const BUSY_CALLS_PER_SECOND = 100;

/**
 * The daemon's load as the dispatcher yields to it (docs/webhooks.md, "Under load"): busy while
 * this process's event loop is at least half used and it serves at least 100 calls a second. Both
 * are needed: the dispatcher's own catching up keeps the loop busy too, and must not slow itself
 * down once the calls are gone.
 */
export class LoadGauge implements Load {
  private calls = 0;
  private sampledAt = performance.now();
  private utilization = performance.eventLoopUtilization();
  private verdict = false;

  /** Counts every call the daemon serves (in-process or over the network). */
  readonly interceptor: Interceptor = (next) => (request) => {
    this.calls++;
    return next(request);
  };

  busy(): boolean {
    const now = performance.now();
    const elapsedMs = now - this.sampledAt;
    if (elapsedMs < SAMPLE_MS) return this.verdict;
    const used = performance.eventLoopUtilization(this.utilization).utilization;
    const callsPerSecond = (this.calls * 1_000) / elapsedMs;
    this.verdict = used >= BUSY_UTILIZATION && callsPerSecond >= BUSY_CALLS_PER_SECOND;
    this.calls = 0;
    this.sampledAt = now;
    this.utilization = performance.eventLoopUtilization();
    return this.verdict;
  }
}
