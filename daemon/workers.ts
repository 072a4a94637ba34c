import cluster, { type Worker } from "node:cluster";
import { performance } from "node:perf_hooks";
import { loadSecrets } from "#daemon/bootstrap.js";
import { ConfigError, loadConfig, StartupError, wholeNumberIn } from "#daemon/config.js";
import { endByHangUp, STOP_SIGNALS } from "#daemon/drain-exit.js";
import { openStore, runDaemon } from "#daemon/main.js";
import {
  beatForPrimary,
  ignoreSendError,
  isHeartbeat,
  isRelayed,
  isStartupFailure,
  isStoreDamage,
  reportStartupFailure,
} from "#daemon/worker-messages.js";

/** Set by the primary in a worker's environment: its number, and the secrets this start created. */
const WORKER_INDEX = "CONSENT_WORKER_INDEX";
const CREATED_SECRETS = "CONSENT_WORKER_CREATED";
/** Set by the primary: how often a worker tells it that it still runs. */
const HEARTBEAT_MS = "CONSENT_WORKER_HEARTBEAT_MS";

/**
 * CONSENT_WORKERS: how many daemon + gateway processes `npm start` runs on the data directory.
 * Default 1: one process is the conservative choice until several writers on one embedded store
 * have run longer under load (docs/behaviour.md); operators opt in to more, up to one per core.
 */
export function workerCount(env: NodeJS.ProcessEnv = process.env): number {
  return wholeNumberIn(env.CONSENT_WORKERS, 1, 64, "CONSENT_WORKERS", "a whole number") ?? 1;
}

/**
 * CONSENT_WORKER_TIMEOUT_MS: how long a worker may go without answering its primary (its event
 * loop blocked, or the process stuck while exiting) before the primary kills it and stops the
 * service. Default 15 s: far above any pause of a working process (a garbage collection, a
 * start-up), short enough that a stuck worker does not hold its share of connections for long.
 */
export function workerTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  return (
    wholeNumberIn(
      env.CONSENT_WORKER_TIMEOUT_MS,
      1_000,
      3_600_000,
      "CONSENT_WORKER_TIMEOUT_MS",
      "a whole number of milliseconds",
    ) ?? 15_000
  );
}

/**
 * `npm start`: daemon and gateway in one process, or in CONSENT_WORKERS such processes (node:cluster)
 * on the same data directory. The workers share the two listening ports, so a client sees one
 * service; every daemon on a store shares its counters and records (decisions §1: several daemons
 * may share one store), and reads from the store's caches within their bound (docs/behaviour.md).
 */
export async function runService(): Promise<void> {
  if (cluster.isWorker) {
    const created = JSON.parse(process.env[CREATED_SECRETS] ?? "[]") as string[];
    // The first worker speaks for the service; the others start silently.
    const welcome = process.env[WORKER_INDEX] === "0" ? { created } : false;
    try {
      await runDaemon({ withGateway: true, welcome, storeFilesChecked: true });
    } catch (error) {
      if (!(error instanceof ConfigError || error instanceof StartupError)) throw error;
      await reportStartupFailure(error.message);
      process.exit(1);
    }
    // Watched from the moment it serves: start-up (building the loader's runtime, opening the
    // store) may hold the loop longer on a loaded machine, and is not a stuck worker.
    beatForPrimary(Number(process.env[HEARTBEAT_MS]));
    return;
  }
  const count = workerCount();
  // Read with the rest of the configuration, so a bad value stops any start, one worker or many.
  const timeoutMs = workerTimeoutMs();
  if (count === 1) {
    await runDaemon({ withGateway: true });
    return;
  }
  await runPrimary(count, timeoutMs);
}

/**
 * The primary creates the secrets and the store first (so workers read them instead of racing
 * to create them: the embedded store's files and databases, MongoDB's indexes), forks the
 * workers, forwards STOP_SIGNALS to them and exits 0 once every one has drained (1 if one did
 * not drain cleanly; after SIGHUP it ends by that signal, as they do). A worker that stops on
 * its own (a start-up error, which the primary prints
 * once for all workers, or a crash) stops the service: the others are told to drain, and the primary exits 1. So does a worker that stops
 * answering: silent for CONSENT_WORKER_TIMEOUT_MS once it serves, it is killed, since it may
 * still hold connections the primary handed it that will never be answered. Exiting, not
 * replacing the worker, leaves the restart to the supervisor, as for any other failure.
 */
async function runPrimary(count: number, timeoutMs: number): Promise<void> {
  const config = loadConfig();
  let stopping = false;
  let failed = false;
  /** The signal the primary was stopped with and passed on to its workers, if it was. */
  let forwarded: NodeJS.Signals | undefined;
  const stopAll = (signal: NodeJS.Signals) => {
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker && !worker.isDead()) worker.process.kill(signal);
    }
  };
  // From the start: a signal while the secrets and the store are prepared stops the service
  // before any worker is forked, with exit code 0 (nothing served yet).
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      forwarded = signal;
      stopAll(signal);
    });
  }
  const { created } = await loadSecrets(config);
  await (await openStore(config)).close();
  if (stopping) process.exit(0);
  const heartbeatMs = Math.min(1_000, Math.floor(timeoutMs / 5));
  for (let index = 0; index < count; index++) {
    cluster.fork({
      [WORKER_INDEX]: String(index),
      [CREATED_SECRETS]: JSON.stringify(created),
      [HEARTBEAT_MS]: String(heartbeatMs),
    });
  }
  /** Each serving worker's last heartbeat (monotonic ms); a worker counts from its first. */
  const lastBeat = new Map<Worker, number>();
  /** Workers the primary killed for their silence (already reported). */
  const killed = new WeakSet<Worker>();
  let lastTick = performance.now();
  setInterval(() => {
    const now = performance.now();
    const late = now - lastTick > 2 * heartbeatMs;
    lastTick = now;
    // The primary itself was paused (stopped, frozen, starved): its workers' heartbeats are
    // still waiting in the channels, read after this tick. Count everyone from now instead.
    if (late) {
      for (const worker of lastBeat.keys()) lastBeat.set(worker, now);
      return;
    }
    for (const [worker, beat] of lastBeat) {
      if (now - beat <= timeoutMs) continue;
      lastBeat.delete(worker);
      if (worker.isDead()) continue;
      process.stderr.write(
        `consent: worker ${worker.process.pid} has not answered for ${Math.round((now - beat) / 1_000)} s; killing it and stopping\n`,
      );
      failed = true;
      killed.add(worker);
      worker.process.kill("SIGKILL");
    }
  }, heartbeatMs).unref();
  let startupFailureShown = false;
  let storeDamage: unknown;
  cluster.on("message", (from, message) => {
    if (isHeartbeat(message)) {
      if (!from.isDead()) lastBeat.set(from, performance.now());
      return;
    }
    if (isStartupFailure(message)) {
      if (!startupFailureShown) process.stderr.write(`consent: ${message.consentStartupFailure}\n`);
      startupFailureShown = true;
      return;
    }
    if (!isRelayed(message)) return;
    if (isStoreDamage(message)) storeDamage = message;
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker && worker !== from && worker.isConnected()) worker.send(message, ignoreSendError);
    }
  });
  // A worker still starting when another met damage had no listener for the relay: it is told
  // once it listens (it subscribes before).
  cluster.on("listening", (worker) => {
    if (storeDamage) worker.send(storeDamage, ignoreSendError);
  });
  cluster.on("exit", (worker, code, signal) => {
    lastBeat.delete(worker);
    // During a drain too: a worker that did not drain cleanly (killed, or its shutdown failed)
    // makes the service's exit a failure. One ended by the very signal the primary passed on
    // had not yet set up its handlers (they answer it with an exit code): it was still starting,
    // had served nothing, and stopped as asked.
    if (signal ? signal !== forwarded : code !== 0) failed = true;
    if (!stopping) {
      stopping = true;
      failed = true;
      if (code !== 1 && !killed.has(worker)) {
        process.stderr.write(
          `consent: worker ${worker.process.pid} stopped (${signal ?? `exit code ${code}`}); stopping\n`,
        );
      }
      stopAll("SIGTERM");
    }
    if (Object.values(cluster.workers ?? {}).every((w) => !w || w.isDead())) {
      // A hang-up drained cleanly ends the primary by it too, as each worker ended (drain-exit.ts).
      if (!failed && forwarded === "SIGHUP") endByHangUp();
      else process.exit(failed ? 1 : 0);
    }
  });
}
