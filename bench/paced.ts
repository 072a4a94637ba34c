import { Agent, request } from "node:http";
import type { Histogram, Result } from "autocannon";
import type { Fixture } from "./fixture.js";
import type { Scenario } from "./scenarios.js";

/** The largest number of requests a paced load keeps open at once (then it counts errors). */
const MAX_SOCKETS = 200;

/**
 * An open-loop load at a steady rate: request i leaves at start + i / rate, whether or not the
 * earlier ones were answered, and its latency counts from that scheduled time (so a stalled
 * generator cannot hide a slow service). autocannon's `overallRate` instead lets each connection
 * send its share of a second in a burst when the second begins. Reports in autocannon's shape
 * (throughput counts response bodies only, where autocannon counts headers too).
 */
export async function pacedLoad(
  baseUrl: string,
  path: string,
  scenario: Scenario,
  fixture: Fixture,
  options: { rate: number; duration: number; nextSequence: () => number },
): Promise<Result> {
  const agent = new Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  const latencies: number[] = [];
  const statusCodeStats: Record<string, { count: number }> = {};
  let errors = 0;
  let mismatches = 0;
  let bytes = 0;
  const started = performance.now();
  const total = Math.round(options.rate * options.duration);

  const send = (scheduledAt: number): Promise<void> =>
    new Promise((resolve) => {
      const next = scenario.request(fixture, options.nextSequence());
      const req = request(
        `${baseUrl}${path}`,
        { method: scenario.method, headers: next.headers, agent },
        (response) => {
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("end", () => {
            latencies.push(performance.now() - scheduledAt);
            const status = String(response.statusCode);
            statusCodeStats[status] = { count: (statusCodeStats[status]?.count ?? 0) + 1 };
            const body = Buffer.concat(chunks);
            bytes += body.length;
            if (scenario.expectBody && !body.toString("utf8").includes(scenario.expectBody)) {
              mismatches++;
            }
            resolve();
          });
          response.on("error", () => {
            errors++;
            resolve();
          });
        },
      );
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end(next.body);
    });

  await openLoop(options.rate, total, send);
  const duration = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const rate = latencies.length / duration;
  const requests = { ...histogram([rate]), total: latencies.length, sent: total };
  return {
    url: `${baseUrl}${path}`,
    duration,
    start: new Date(Date.now() - duration * 1000),
    finish: new Date(),
    connections: MAX_SOCKETS,
    pipelining: 1,
    latency: histogram(latencies),
    requests,
    throughput: { ...histogram([bytes / duration]), total: bytes },
    errors,
    timeouts: 0,
    mismatches,
    non2xx: latencies.length - (statusCodeStats["200"]?.count ?? 0),
    resets: 0,
    statusCodeStats,
  };
}

/**
 * Calls `send` `total` times at `rate` per second, open loop: call i starts at start + i / rate
 * (its `scheduledAt`, on the performance clock) whether or not the earlier ones have finished.
 * Resolves once every call has.
 */
export async function openLoop(
  rate: number,
  total: number,
  send: (scheduledAt: number) => Promise<void>,
): Promise<void> {
  const started = performance.now();
  const calls: Promise<void>[] = [];
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000));
      while (calls.length < due) calls.push(send(started + (calls.length * 1000) / rate));
      if (calls.length >= total) {
        clearInterval(tick);
        resolve();
      }
    }, 1);
  });
  await Promise.all(calls);
}

/** Percentiles of sorted values, in autocannon's histogram shape (ms for latencies). */
export function histogram(sorted: number[]): Histogram {
  const at = (q: number) =>
    sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
  const average = sorted.reduce((sum, value) => sum + value, 0) / Math.max(1, sorted.length);
  const round = (value: number) => Math.round(value * 100) / 100;
  return {
    average: round(average),
    mean: round(average),
    stddev: 0,
    min: round(sorted[0] ?? 0),
    max: round(sorted[sorted.length - 1] ?? 0),
    total: sorted.length,
    p50: round(at(0.5)),
    p90: round(at(0.9)),
    p97_5: round(at(0.975)),
    p99: round(at(0.99)),
    p99_9: round(at(0.999)),
  };
}
