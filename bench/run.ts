import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import {
  type CommitLatency,
  describeCommitLatency,
  measureCommitLatency,
} from "./commit-latency.js";
import type { ControlRoute } from "./control-server.js";
import { createFixture, type Fixture } from "./fixture.js";
import {
  failures,
  type LoadSettings,
  probe,
  type RunResult,
  runLoad,
  succeeded,
  type TailCount,
  type WebhookDrain,
} from "./load.js";
import { type LoaderSize, measureLoader } from "./loader-size.js";
import { renderSummary, summariseProfiles } from "./profile.js";
import { disturbed, judge, runsTable, tailLines, verdictTable, webhookLines } from "./report.js";
import { LOG_ROUTE, type Scenario, scenarios } from "./scenarios.js";
import {
  freePort,
  PROCESSES,
  REPO_ROOT,
  type RunningService,
  startProcess,
  startService,
  stopProcess,
  type Topology,
  waitUntil,
} from "./service.js";
import type { ReceiverStats } from "./webhook-receiver.js";

/**
 * `npm run bench`: starts the service from its bins on a fresh data directory, mints a fixture,
 * loads every scenario with autocannon beside a bare-Fastify control in the same run, prints the
 * ratios against the targets and writes the raw figures to bench/results/latest.json.
 * Options: --only a,b  --duration s  --warmup s  --connections n  --keys n  --subjects n
 *          --quiet-wait s (before each run, wait up to s seconds for other work to stop)
 *          --profile (service under node --cpu-prof; summary printed, figures to profiled.json)
 *          --check (exit 1 when a target is missed)
 *          --workers n (CONSENT_WORKERS of the single topology; default 2)
 *          --node-options=... (NODE_OPTIONS of the service's processes only, e.g. a heap setting)
 */

/** A mistake on the command line: said in one line with the scenario names, exit 2. */
function usage(message: string): never {
  process.stderr.write(
    `bench: ${message}\nscenarios: ${scenarios.map((s) => s.name).join(", ")}\n`,
  );
  process.exit(2);
}

function parseOptions() {
  try {
    return parseArgs(OPTIONS);
  } catch (error) {
    // node:util's ERR_PARSE_ARGS_* errors (an unknown option, a value missing) say it plainly.
    return usage(error instanceof Error ? error.message : String(error));
  }
}

const OPTIONS = {
  options: {
    only: { type: "string" },
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "50" },
    keys: { type: "string", default: "400" },
    subjects: { type: "string", default: "2000" },
    "quiet-wait": { type: "string", default: "10" },
    profile: { type: "boolean", default: false },
    check: { type: "boolean", default: false },
    workers: { type: "string", default: "2" },
    "node-options": { type: "string" },
  },
} as const;

const { values: args } = parseOptions();

const RESULTS_DIR = path.join(REPO_ROOT, "bench", "results");
/** The service trusts the benchmark as a proxy, so a scenario may spread client IPs (X-Forwarded-For). */
const TRUST_PROXY = "127.0.0.1";

const settings: LoadSettings = {
  connections: Number(args.connections),
  durationSeconds: Number(args.duration),
  warmupSeconds: Number(args.warmup),
  pipelining: 1,
  quietWaitSeconds: Number(args["quiet-wait"]),
};

const log = (line: string) => process.stderr.write(`${line}\n`);

function selectedScenarios(): Scenario[] {
  if (!args.only) return scenarios;
  const names = new Set(args.only.split(","));
  const unknown = [...names].filter((name) => !scenarios.some((s) => s.name === name));
  if (unknown.length) usage(`unknown scenario(s): ${unknown.join(", ")}`);
  return scenarios.filter((scenario) => names.has(scenario.name));
}

const controlUrlOf = (scenario: Scenario) => `/control/${scenario.name}`;

/**
 * A helper program of the benchmark (`bench/<script>`, its own process) on a free port, once
 * `readyPath` answers 200.
 */
async function startHelper(
  name: string,
  script: string,
  args: string[],
  readyPath: string,
  logFile: string,
) {
  const port = await freePort();
  const child = startProcess(name, ["--import", "tsx", `bench/${script}`, String(port), ...args], {
    env: {},
    logFile,
  });
  const url = `http://127.0.0.1:${port}`;
  const ready = async () => (await fetch(`${url}${readyPath}`)).status === 200;
  await waitUntil(name, ready, [child], logFile).catch(async (error) => {
    await stopProcess(child);
    throw error;
  });
  return { url, pid: child.pid ?? -1, stop: () => stopProcess(child) };
}

/** The bare-Fastify control in its own process, serving the captured reply of each route. */
async function startControl(routes: ControlRoute[], logFile: string) {
  const routesFile = path.join(RESULTS_DIR, "control-routes.json");
  await writeFile(routesFile, JSON.stringify(routes));
  return startHelper("control", "control-server.ts", [routesFile, TRUST_PROXY], "/health", logFile);
}

/** How long the benchmark waits for a webhook scenario's deliveries after its run. */
const WEBHOOK_DRAIN_LIMIT_MS = 180_000;

/** The integrator's webhook endpoint (bench/webhook-receiver.ts) in its own process. */
async function startReceiver(logFile: string) {
  const helper = await startHelper(
    "webhook-receiver",
    "webhook-receiver.ts",
    [],
    "/_bench/stats",
    logFile,
  );
  const { url } = helper;
  return {
    ...helper,
    stats: async () => (await (await fetch(`${url}/_bench/stats`)).json()) as ReceiverStats,
    /** Arms the receiver's signature check with the endpoint's secret. */
    async arm(secret: string) {
      await fetch(`${url}/_bench/secret`, { method: "PUT", body: secret });
    },
  };
}

type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/**
 * After a webhook scenario's run: waits until the receiver holds an event for every choice the
 * log route acknowledged (probe included), so the deliveries neither go missing unnoticed nor
 * spill into the next scenario.
 */
async function drainWebhooks(
  receiver: Receiver,
  expected: number,
  runEndedAt: number,
  eventsAtRunEnd: number,
): Promise<WebhookDrain> {
  const deadline = Date.now() + WEBHOOK_DRAIN_LIMIT_MS;
  let stats = await receiver.stats();
  while (stats.events < expected && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    stats = await receiver.stats();
  }
  return {
    expected,
    events: stats.events,
    verified: stats.verified,
    rejected: stats.rejected,
    eventsAtRunEnd,
    trailingSeconds: Math.max(0, (stats.lastAt - runEndedAt) / 1000),
  };
}

/**
 * Follows the fixture team's log with TailConsentLogs, as `consentctl logs tail` does, until
 * stop(), which first waits for the rows still on their way (a tail sweeps twice a second).
 */
async function followLog(daemonUrl: string, fixture: Fixture) {
  const abort = new AbortController();
  const client = createClient(ConsentLogService, createGrpcTransport({ baseUrl: daemonUrl }));
  const seen = new Set<string>();
  let repeated = 0;
  const stream = client.tailConsentLogs(
    {},
    {
      headers: {
        authorization: `Bearer ${fixture.operatorToken}`,
        "consent-team": fixture.teamId,
      },
      signal: abort.signal,
    },
  );
  const responses = stream[Symbol.asyncIterator]();
  // The first, empty message says the tail is following.
  await responses.next();
  const reading = (async () => {
    for (;;) {
      const { value, done } = await responses.next();
      if (done) return;
      for (const entry of value.entries) {
        if (seen.has(entry.consentLogId)) repeated++;
        else seen.add(entry.consentLogId);
      }
    }
  })().catch((error: unknown) => {
    if (!abort.signal.aborted) throw error;
  });
  return {
    async stop(expected: number): Promise<TailCount> {
      const deadline = Date.now() + 5_000;
      while (seen.size < expected && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // One more sweep, so a row sent twice would show.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      abort.abort();
      await reading;
      return { expected, rows: seen.size, repeated };
    },
  };
}

/** Runs one topology's scenarios: each on the service, then on the control when it has one. */
async function runTopology(
  service: RunningService,
  group: Scenario[],
  fixture: Fixture,
  logFile: string,
  receiver: Receiver | undefined,
): Promise<RunResult[]> {
  const routes: ControlRoute[] = [];
  for (const scenario of group) {
    const reply = await probe(service.gatewayUrl, scenario, fixture);
    if (scenario.targets.some((target) => target.kind === "control")) {
      routes.push({ method: scenario.method, url: controlUrlOf(scenario), reply });
    }
  }
  const control = routes.length ? await startControl(routes, logFile) : undefined;
  const runs: RunResult[] = [];
  try {
    for (const scenario of group) {
      log(`  ${scenario.name}: ${service.topology} service…`);
      const serviceTarget = {
        side: service.topology,
        baseUrl: service.gatewayUrl,
        path: scenario.path,
        pids: service.pids,
        helperPids: receiver ? [receiver.pid] : [],
      };
      const tail = scenario.tailed ? await followLog(service.daemonUrl, fixture) : undefined;
      const run = await runLoad(serviceTarget, scenario, fixture, settings);
      if (tail) {
        log(`  ${scenario.name}: waiting for the tail's last rows…`);
        run.tail = await tail.stop(succeeded(run));
      }
      if (scenario.webhookSubscriber && receiver) {
        const runEndedAt = Date.now();
        const atEnd = (await receiver.stats()).events;
        log(`  ${scenario.name}: waiting for the webhook deliveries…`);
        // +1: the probe's choice.
        run.webhooks = await drainWebhooks(receiver, succeeded(run) + 1, runEndedAt, atEnd);
      }
      runs.push(run);
      if (control && routes.some((route) => route.url === controlUrlOf(scenario))) {
        log(`  ${scenario.name}: control…`);
        const controlTarget = {
          side: "control" as const,
          baseUrl: control.url,
          path: controlUrlOf(scenario),
          pids: [control.pid],
        };
        runs.push(await runLoad(controlTarget, scenario, fixture, settings));
      }
    }
  } finally {
    await control?.stop();
  }
  return runs;
}

/**
 * For each measured service run, the profiles of its topology's processes cut to the run's
 * window; threads that were nearly idle then (tsx's loader thread) are left out.
 */
async function printProfiles(profileDir: string, runs: RunResult[]) {
  for (const run of runs) {
    if (run.side === "control") continue;
    process.stdout.write(`\n=== profile of ${run.scenario} (${run.side}) ===\n`);
    for (const name of PROCESSES[run.side]) {
      const summaries = await summariseProfiles(path.join(profileDir, name), {
        window: run.window,
      });
      for (const summary of summaries.filter((s) => (s.utilisation ?? 1) > 0.05)) {
        process.stdout.write(`\n${renderSummary(summary)}\n`);
      }
    }
  }
}

/** Runs every selected scenario, topology after topology, on one data directory. */
async function measureAll(selected: Scenario[], logFile: string, profileDir: string | undefined) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "consent-bench-"));
  const topologies = [...new Set(selected.map((scenario) => scenario.topology))] as Topology[];
  const runs: RunResult[] = [];
  let fixture: Fixture | undefined;
  let loader: LoaderSize | undefined;
  const receiver = selected.some((scenario) => scenario.webhookSubscriber)
    ? await startReceiver(logFile)
    : undefined;
  try {
    for (const topology of topologies) {
      log(`Starting the ${topology} service on ${dataDir}…`);
      const service = await startService(topology, {
        dataDir,
        // The receiver listens on loopback, which the SSRF guard refuses unless allowed.
        env: {
          CONSENT_TRUST_PROXY: TRUST_PROXY,
          CONSENT_WORKERS: args.workers,
          ...(receiver && { CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" }),
          ...(args["node-options"] && { NODE_OPTIONS: args["node-options"] }),
        },
        logFile,
        profileDir,
      });
      try {
        if (!fixture) {
          log(`Minting ${args.keys} keys, a banner and ${args.subjects} subject states…`);
          fixture = await createFixture(
            service,
            dataDir,
            { keys: Number(args.keys), subjects: Number(args.subjects) },
            receiver?.url,
          );
          if (fixture.subscribed) await receiver?.arm(fixture.subscribed.webhookSecret);
          loader = await measureLoader(service.gatewayUrl, fixture.banner.publicId);
        }
        const group = selected.filter((scenario) => scenario.topology === topology);
        runs.push(...(await runTopology(service, group, fixture, logFile, receiver)));
      } finally {
        await service.stop();
      }
    }
  } finally {
    await receiver?.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
  return { runs, fixture, loader };
}

/** Prints the tables and writes every figure as JSON; returns how many requests failed. */
async function report(
  selected: Scenario[],
  runs: RunResult[],
  fixture: Fixture | undefined,
  loader: LoaderSize | undefined,
  commit: CommitLatency | undefined,
) {
  const verdicts = judge(selected, runs);
  const machine = {
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? "unknown",
    platform: `${os.platform()} ${os.release()}`,
  };
  const date = new Date().toISOString();
  const { connections, warmupSeconds, durationSeconds, pipelining } = settings;
  const out = [
    `\nconsent-service benchmark, ${date}, Node ${machine.node}, ${machine.cpus} CPUs (${machine.cpuModel})`,
    `${connections} connections, ${warmupSeconds} s warm-up + ${durationSeconds} s per run, pipelining ${pipelining}${args.profile ? ", SERVICE UNDER --cpu-prof" : ""}`,
    `\n${runsTable(runs)}\n\n${verdictTable(verdicts)}`,
  ];
  if (loader) {
    const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
    out.push(
      `\nLoader payload (GET ${loader.url}, the fixture's banner): ${kb(loader.identity)} raw, ${kb(loader.gzip)} gzip, ${kb(loader.brotli)} brotli first built, ${kb(loader.brotliRecompressed)} once recompressed (budget 10 KB brotli)`,
    );
  }
  if (commit) out.push(`\n${describeCommitLatency(commit)}`);
  const tails = tailLines(runs);
  if (tails.length) out.push(`\nOperator tails (TailConsentLogs):\n${tails.join("\n")}`);
  const webhooks = webhookLines(runs);
  if (webhooks.length)
    out.push(`\nWebhook deliveries (bench/webhook-receiver.ts):\n${webhooks.join("\n")}`);
  if (runs.some(disturbed)) {
    out.push(
      "\n* Other processes used over 10% of the machine during a run: its figures are unreliable.",
    );
  }
  const failed = runs.reduce((sum, run) => sum + failures(run), 0);
  if (failed > 0) out.push(`\nINVALID: ${failed} requests did not succeed as expected`);

  const file = path.join(RESULTS_DIR, args.profile ? "profiled.json" : "latest.json");
  const fixtureSize = { keys: fixture?.keys.length, subjects: fixture?.subjectIds.length };
  const described = selected.map((scenario) => ({
    name: scenario.name,
    description: scenario.description,
    topology: scenario.topology,
    route: `${scenario.method} ${scenario.path}`,
  }));
  const json = {
    date,
    machine,
    settings,
    fixture: fixtureSize,
    loader,
    commitLatency: commit,
    scenarios: described,
    runs,
    verdicts,
  };
  await writeFile(file, `${JSON.stringify(json, null, 2)}\n`);
  out.push(`\nRaw figures: ${path.relative(REPO_ROOT, file)}`);
  process.stdout.write(`${out.join("\n")}\n`);
  return { failed, missed: verdicts.some((verdict) => verdict.result === "FAIL") };
}

async function main(): Promise<number> {
  const selected = selectedScenarios();
  await mkdir(RESULTS_DIR, { recursive: true });
  const logFile = path.join(RESULTS_DIR, "service.log");
  await writeFile(logFile, "");
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const profileDir = args.profile ? path.join(RESULTS_DIR, "profiles", stamp) : undefined;
  const { runs, fixture, loader } = await measureAll(selected, logFile, profileDir);
  // The log route's p99 target beside what the disk alone allows, measured after the loads.
  const commit = selected.some((scenario) => scenario.path === LOG_ROUTE)
    ? await measureCommitLatency()
    : undefined;
  const { failed, missed } = await report(selected, runs, fixture, loader, commit);
  if (profileDir) await printProfiles(profileDir, runs);
  if (failed > 0) return 1;
  return args.check && missed ? 1 : 0;
}

process.exit(await main());
