import type { Logger } from "pino";
import type { Clock } from "#daemon/clock.js";
import { isStoreFull } from "#daemon/store/disk-guard.js";
import type { Store } from "#daemon/store/store.js";

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
  const [subjects, sessions, counters] = await Promise.all([
    store.subjects.purgeExpired(now),
    store.sessions.purgeExpired(now),
    store.counters.purgeExpired(now),
  ]);
  return { subjects, sessions, counters };
}

/**
 * Runs purgeExpired FIRST_PURGE_MS after start, then every PURGE_INTERVAL_MS, on timers that never
 * keep the process alive.
 */
export function schedulePurge(store: Store, clock: Clock, logger: Logger): () => void {
  const purge = () => {
    purgeExpired(store, clock()).then(
      (removed) => logger.debug({ removed }, "purged expired records"),
      (err) => {
        // A full disk is reported once by the store's guard; the next round tries again.
        if (!isStoreFull(err)) logger.error({ err }, "purging expired records failed");
      },
    );
  };
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
