import cluster from "node:cluster";
import { loadSecrets } from "#daemon/bootstrap.js";
import { loadConfig, wholeNumberIn } from "#daemon/config.js";
import { runDaemon } from "#daemon/main.js";
import { ignoreSendError, isPublicChange } from "#daemon/worker-messages.js";

/** Set by the primary in a worker's environment: its number, and the secrets this start created. */
const WORKER_INDEX = "CONSENT_WORKER_INDEX";
const CREATED_SECRETS = "CONSENT_WORKER_CREATED";

/**
 * CONSENT_WORKERS: how many daemon + gateway processes `npm start` runs on the data directory.
 * Default 1: one process is the conservative choice until several writers on one embedded store
 * have run longer under load (docs/behaviour.md); operators opt in to more, up to one per core.
 */
export function workerCount(env: NodeJS.ProcessEnv = process.env): number {
  return wholeNumberIn(env.CONSENT_WORKERS, 1, 64, "CONSENT_WORKERS", "a whole number") ?? 1;
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
    await runDaemon({ withGateway: true, welcome });
    return;
  }
  const count = workerCount();
  if (count === 1) {
    await runDaemon({ withGateway: true });
    return;
  }
  await runPrimary(count);
}

/**
 * The primary creates the secrets first (so workers read them instead of racing to write them),
 * forks the workers, forwards SIGTERM/SIGINT to them and exits 0 once every one has drained. A
 * worker that stops on its own (a start-up error it has already printed, a crash) stops the
 * service: the others are told to drain, and the primary exits 1.
 */
async function runPrimary(count: number): Promise<void> {
  const { created } = await loadSecrets(loadConfig());
  let stopping = false;
  let failed = false;
  const stopAll = (signal: NodeJS.Signals) => {
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker && !worker.isDead()) worker.process.kill(signal);
    }
  };
  for (let index = 0; index < count; index++) {
    cluster.fork({ [WORKER_INDEX]: String(index), [CREATED_SECRETS]: JSON.stringify(created) });
  }
  cluster.on("message", (from, message) => {
    if (!isPublicChange(message)) return;
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker && worker !== from && worker.isConnected()) worker.send(message, ignoreSendError);
    }
  });
  cluster.on("exit", (worker, code, signal) => {
    if (!stopping) {
      stopping = true;
      failed = true;
      if (code !== 1) {
        process.stderr.write(
          `consent: worker ${worker.process.pid} stopped (${signal ?? `exit code ${code}`}); stopping\n`,
        );
      }
      stopAll("SIGTERM");
    }
    if (Object.values(cluster.workers ?? {}).every((w) => !w || w.isDead())) {
      process.exit(failed ? 1 : 0);
    }
  });
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      stopAll(signal);
    });
  }
}
