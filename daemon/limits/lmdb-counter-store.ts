import type { Database } from "lmdb";
import type { CounterStore } from "#daemon/limits/counter-store.js";
import { type ExpiryIndex, expiryKey, purgeExpiredIn } from "#daemon/store/lmdb-keys.js";

/** A stored rate-limit counter. */
export interface CounterRecord {
  count: number;
  expiresAt: Date;
}

/**
 * The named databases of the counter store. They live in their own environment, opened without
 * fsync: a lost count after a machine crash is acceptable, an fsync on every request is not.
 */
export interface LmdbCounterDatabases {
  counters: Database<CounterRecord, string>;
  /** [expiresAtMs, name] → name; moved only when a counter starts or restarts. */
  counterNamesByExpiry: ExpiryIndex;
}

/** Port: a counter expired at `now` counts as 0; the next increment restarts it. */
function isLive(counter: CounterRecord, now: Date): boolean {
  return counter.expiresAt > now;
}

/**
 * CounterStore over LMDB. increment() reads and writes inside one write transaction, which LMDB
 * serialises across processes, so concurrent increments are never lost (port promise).
 */
export function createLmdbCounterStore(dbs: LmdbCounterDatabases): CounterStore {
  const { counters, counterNamesByExpiry } = dbs;
  return {
    increment(name, expiresAt, now) {
      return counters.transaction(() => {
        const stored = counters.get(name);
        if (stored && isLive(stored, now)) {
          counters.putSync(name, { count: stored.count + 1, expiresAt: stored.expiresAt });
          return stored.count + 1;
        }
        if (stored) counterNamesByExpiry.removeSync(expiryKey(name, stored.expiresAt));
        counters.putSync(name, { count: 1, expiresAt });
        counterNamesByExpiry.putSync(expiryKey(name, expiresAt), name);
        return 1;
      });
    },
    async get(name, now) {
      const counter = counters.get(name);
      return counter && isLive(counter, now) ? counter.count : 0;
    },
    purgeExpired(now) {
      return purgeExpiredIn(counters, counterNamesByExpiry, now, (name) => {
        const counter = counters.get(name);
        if (!counter || isLive(counter, now)) return false;
        return counters.removeSync(name);
      });
    },
  };
}
