import os from "node:os";
import autocannon, { type Result } from "autocannon";
import type { Fixture } from "./fixture.js";
import { pacedLoad } from "./paced.js";
import { monotonicUs, type Window } from "./profile.js";
import type { Scenario } from "./scenarios.js";
import { processCpuMs } from "./service.js";

export interface LoadSettings {
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  pipelining: number;
  /** How long to wait for other work on the machine to stop before each run. */
  quietWaitSeconds: number;
}

/** Where a load goes: the service's gateway in a topology, or the control. */
export interface LoadTarget {
  side: "single" | "split" | "control";
  baseUrl: string;
  path: string;
  /** The processes serving it, whose CPU time the run reports. */
  pids: number[];
  /**
   * The benchmark's own helper processes working during the run (the webhook receiver): neither
   * the service's CPU nor other people's work.
   */
  helperPids?: number[];
}

/** What one side of a scenario measured: the figures the table shows and the JSON keeps. */
export interface RunResult {
  scenario: string;
  side: LoadTarget["side"];
  url: string;
  requestsPerSecond: number;
  latencyMs: { average: number; p50: number; p90: number; p99: number; max: number };
  requests: number;
  durationSeconds: number;
  /** Average response size, headers included. */
  bytesPerResponse: number;
  /** CPU time (user + system, every thread) of the serving processes per request; Linux only. */
  cpuMicrosPerRequest: number | undefined;
  /** Share of the whole machine (every core) that was busy during the run, load generator included. */
  machineBusy: number;
  /** Share of the machine busy just before the run, when nothing of the benchmark ran. */
  busyBefore: number;
  /**
   * Share of the machine used by neither the serving processes nor the benchmark (autocannon):
   * other people's work, which makes the figures of the run unreliable when it is large.
   */
  otherBusy: number | undefined;
  statusCounts: Record<string, number>;
  /** Responses whose status was not the scenario's. */
  wrongStatus: number;
  /** Responses whose body lacked the scenario's expected text (a wrong status counts here too). */
  mismatches: number;
  /** Connection errors, timeouts included. */
  errors: number;
  warmup: { requests: number; wrongStatus: number; mismatches: number; errors: number };
  /** The measured part on the monotonic clock, to cut a CPU profile to it. */
  window: Window;
  /** For a `webhookSubscriber` scenario: what the receiver got (bench/run.ts fills it in). */
  webhooks?: WebhookDrain;
  /** For a `tailed` scenario: what the operator's tail received (bench/run.ts fills it in). */
  tail?: TailCount;
}

/** The rows a `tailed` scenario's tail received, against the choices the route acknowledged. */
export interface TailCount {
  /** Choices acknowledged with 200 (warm-up and measured run; the probe precedes the tail). */
  expected: number;
  /** Distinct rows the tail received. */
  rows: number;
  /** Rows received more than once (a tail sends each row once). */
  repeated: number;
}

/** The deliveries of a `webhookSubscriber` scenario's events, counted at the receiver. */
export interface WebhookDrain {
  /** Explicit choices acknowledged with 200 (probe, warm-up and measured run). */
  expected: number;
  /** Distinct events received. */
  events: number;
  /** Deliveries whose Standard Webhooks signature verified; `rejected` the others. */
  verified: number;
  rejected: number;
  /** Distinct events received when the measured run ended. */
  eventsAtRunEnd: number;
  /** Seconds from the end of the measured run to the last event's arrival (0: none trailed). */
  trailingSeconds: number;
}

/**
 * Answers of a run (or its warm-up) without the expected status and body text. An error body
 * never holds the expected text, so mismatches already include wrong statuses.
 */
function unexpected(part: { wrongStatus: number; mismatches: number }): number {
  return Math.max(part.wrongStatus, part.mismatches);
}

/** Requests that got the expected answer, warm-up included. */
export function succeeded(run: RunResult): number {
  return run.requests - unexpected(run) + run.warmup.requests - unexpected(run.warmup);
}

/**
 * Requests that did not succeed as the scenario expects, for a webhook scenario each
 * acknowledged choice whose event never arrived or arrived unverifiable, and for a tailed one
 * each acknowledged choice its tail missed or repeated; 0 for a valid run.
 */
export function failures(run: RunResult): number {
  const webhooks = run.webhooks
    ? Math.max(0, run.webhooks.expected - run.webhooks.events) + run.webhooks.rejected
    : 0;
  const tail = run.tail ? Math.max(0, run.tail.expected - run.tail.rows) + run.tail.repeated : 0;
  return (
    unexpected(run) + run.errors + unexpected(run.warmup) + run.warmup.errors + webhooks + tail
  );
}

/** Request numbers are never reused in one benchmark, so fresh subject ids stay fresh. */
let nextSequence = 0;

export function takeSequence(): number {
  return nextSequence++;
}

/** `200: n` for the status code stats of autocannon. */
function statusCounts(result: Result): Record<string, number> {
  return Object.fromEntries(
    Object.entries(result.statusCodeStats ?? {}).map(([status, { count }]) => [status, count]),
  );
}

function wrongStatusOf(result: Result, expectStatus: number): number {
  const counts = statusCounts(result);
  const total = Object.values(counts).reduce((sum, count) => sum + count, 0);
  return total - (counts[String(expectStatus)] ?? 0);
}

/** Busy and total CPU ms of the whole machine so far, every core summed. */
function machineTimes() {
  let busy = 0;
  let total = 0;
  for (const { times } of os.cpus()) {
    const all = times.user + times.nice + times.sys + times.idle + times.irq;
    busy += all - times.idle;
    total += all;
  }
  return { busy, total };
}

/** Share of the machine busy over the next `ms`. */
async function machineBusyOver(ms: number): Promise<number> {
  const before = machineTimes();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = machineTimes();
  return (after.busy - before.busy) / Math.max(1, after.total - before.total);
}

/** A busier idle machine than this means someone else is using it. */
const QUIET_BUSY = 0.15;

/**
 * Waits (up to `patienceMs`) until the machine is quiet before a measured run, since other work
 * on the same cores skews the figures; returns how busy it still was.
 */
export async function awaitQuietMachine(patienceMs = 60_000): Promise<number> {
  const deadline = Date.now() + patienceMs;
  let busy = await machineBusyOver(1_000);
  while (busy > QUIET_BUSY && Date.now() < deadline) busy = await machineBusyOver(1_000);
  return busy;
}

/**
 * Sends one request of the scenario and returns the JSON it got. It proves the scenario works
 * before any load, and its body becomes the control's reply for the route.
 */
export async function probe(baseUrl: string, scenario: Scenario, fixture: Fixture) {
  const request = scenario.request(fixture, takeSequence());
  const response = await fetch(`${baseUrl}${scenario.path}`, {
    method: scenario.method,
    headers: request.headers,
    body: request.body,
  });
  const text = await response.text();
  if (
    response.status !== scenario.expectStatus ||
    (scenario.expectBody && !text.includes(scenario.expectBody))
  ) {
    throw new Error(`probe of ${scenario.name}: got ${response.status} ${text}`);
  }
  return JSON.parse(text) as unknown;
}

/**
 * One run of the scenario's requests, each built afresh (own key, own body): autocannon, or the
 * steady open-loop load of paced.ts for a `paced` scenario.
 */
function cannon(
  target: LoadTarget,
  scenario: Scenario,
  fixture: Fixture,
  options: { connections: number; duration: number; pipelining: number },
): PromiseLike<Result> {
  const { expectBody } = scenario;
  if (scenario.paced && scenario.overallRate) {
    return pacedLoad(target.baseUrl, target.path, scenario, fixture, {
      rate: scenario.overallRate,
      duration: options.duration,
      nextSequence: takeSequence,
    });
  }
  return autocannon({
    url: target.baseUrl,
    ...options,
    overallRate: scenario.overallRate,
    requests: [
      {
        method: scenario.method,
        path: target.path,
        setupRequest(request) {
          const next = scenario.request(fixture, takeSequence());
          return { ...request, headers: { ...request.headers, ...next.headers }, body: next.body };
        },
      },
    ],
    verifyBody: expectBody ? (body) => body.includes(expectBody) : undefined,
  });
}

/** Loads the target with the scenario: a warm-up, then the measured run. */
export async function runLoad(
  target: LoadTarget,
  scenario: Scenario,
  fixture: Fixture,
  settings: LoadSettings,
): Promise<RunResult> {
  const shape = { connections: settings.connections, pipelining: settings.pipelining };
  const busyBefore = await awaitQuietMachine(settings.quietWaitSeconds * 1000);
  const warmup = await cannon(target, scenario, fixture, {
    ...shape,
    duration: settings.warmupSeconds,
  });
  const cpuBefore = await processCpuMs(target.pids);
  const helpersBefore = await processCpuMs(target.helperPids ?? []);
  const benchBefore = process.cpuUsage();
  const machineBefore = machineTimes();
  const startUs = monotonicUs();
  const result = await cannon(target, scenario, fixture, {
    ...shape,
    duration: settings.durationSeconds,
  });
  const endUs = monotonicUs();
  const machineAfter = machineTimes();
  const bench = process.cpuUsage(benchBefore);
  const cpuAfter = await processCpuMs(target.pids);
  const helpersAfter = await processCpuMs(target.helperPids ?? []);
  const requests = result.requests.total;
  const machineTotalMs = machineAfter.total - machineBefore.total;
  const servingMs =
    cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore;
  const benchMs = (bench.user + bench.system) / 1000 + ((helpersAfter ?? 0) - (helpersBefore ?? 0));
  return {
    scenario: scenario.name,
    side: target.side,
    url: `${target.baseUrl}${target.path}`,
    requestsPerSecond: result.requests.average,
    latencyMs: {
      average: result.latency.average,
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
    },
    requests,
    durationSeconds: result.duration,
    bytesPerResponse: requests ? result.throughput.total / requests : 0,
    cpuMicrosPerRequest:
      servingMs === undefined || !requests ? undefined : (servingMs * 1000) / requests,
    machineBusy: (machineAfter.busy - machineBefore.busy) / machineTotalMs,
    busyBefore,
    otherBusy:
      servingMs === undefined
        ? undefined
        : Math.max(0, machineAfter.busy - machineBefore.busy - servingMs - benchMs) /
          machineTotalMs,
    statusCounts: statusCounts(result),
    wrongStatus: wrongStatusOf(result, scenario.expectStatus),
    mismatches: result.mismatches,
    errors: result.errors,
    warmup: {
      requests: warmup.requests.total,
      wrongStatus: wrongStatusOf(warmup, scenario.expectStatus),
      mismatches: warmup.mismatches,
      errors: warmup.errors,
    },
    window: { startUs, endUs },
  };
}
