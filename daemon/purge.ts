import type { Logger } from "pino";
import type { Clock } from "#daemon/clock.js";
import type { Store } from "#daemon/store/store.js";
import { settleAll, storeFailureLog } from "#daemon/store/store-failures.js";

/** How often expired subject records, sessions and counters are removed. */
export const PURGE_INTERVAL_MS = 10 * 60_000;
/**
 * The first purge after start: soon, so a daemon restarted more often than PURGE_INTERVAL_MS
 * (a deployment, a crash loop) still purges; not at once, so a start is not slowed by it.
 */
export const FIRST_PURGE_MS = 60_000;

/**
 * decisions §4: expired records are treated as absent at once and purged later. Every daemon on a
 * store may run this; deleting what is already gone is harmless.
 */
export async function purgeExpired(store: Store, now: Date) {
  // Each kind is purged whatever became of the others, and each failure is logged by its cause.
  const [subjects, sessions, counters] = await settleAll([
    store.subjects.purgeExpired(now),
    store.sessions.purgeExpired(now),
    store.counters.purgeExpired(now),
  ]);
  return { subjects, sessions, counters };
}

/**
 * One round of the purge, logged: what it removed (debug), or why it failed, by each cause
 * (storeFailureLog): the store out of reach is a warning, a full disk is the guard's to report,
 * anything else an error. The next round tries again.
 */
export function purgeRound(store: Store, clock: Clock, logger: Logger): () => Promise<void> {
  const logFailure = storeFailureLog(store, logger, {
    unavailable: "the store cannot be reached; expired records are purged once it can",
    failed: "purging expired records failed",
  });
  return () =>
    purgeExpired(store, clock()).then(
      (removed) => logger.debug({ removed }, "purged expired records"),
      (error: unknown) => logFailure(error),
    );
}

/**
 * Runs purgeRound FIRST_PURGE_MS after start, then every PURGE_INTERVAL_MS, on timers that never
 * keep the process alive.
 */
export function schedulePurge(store: Store, clock: Clock, logger: Logger): () => void {
  const round = purgeRound(store, clock, logger);
  const purge = () => void round();
  let interval: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    purge();
    interval = setInterval(purge, PURGE_INTERVAL_MS);
    interval.unref();
  }, FIRST_PURGE_MS);
  first.unref();
  return () => {
    clearTimeout(first);
    clearInterval(interval);
  };
}
