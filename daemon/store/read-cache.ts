import type { Store } from "#daemon/store/store.js";

/**
 * How long a cached key, team or banner record may be served without reading the store again.
 * Writes made through this daemon drop the cache at once; another daemon's writes on the same
 * store (a revocation, a plan change, a banner edit) are seen within this bound
 * (docs/behaviour.md, "Caching").
 */
export const READ_CACHE_TTL_MS = 1_000;

/** Entries per cache; past it the oldest entry makes room. */
const MAX_ENTRIES = 10_000;

export interface ReadCacheOptions {
  ttlMs?: number;
  /**
   * Called after each write through a cached sub-store has finished (a revocation, a plan change,
   * a banner write), so other processes holding such caches can drop theirs (worker-messages.ts).
   */
  onWrite?: () => void;
  /** Monotonic milliseconds (tests may drive it). */
  now?: () => number;
}

/**
 * The store with short-lived in-process caches on the reads every authenticated request makes:
 * an API key by hash, a team by id, a banner by public id. Each cache belongs to one sub-store,
 * and any other call on that sub-store (an insert, revoke, setPlan, replace: every method that is
 * not a known read) drops it before and after the call, so this daemon never serves a record
 * older than its own last write. Only records found are cached: a key minted by another daemon
 * works at once. Expiry and revocation are still checked on the cached record against the clock.
 * Subject states, sessions, counters and the consent log are never cached. `options.onWrite`
 * lets other processes of one service drop theirs at once too.
 */
export function withReadCache(store: Store, options: ReadCacheOptions = {}): CachedStore {
  const ttlMs = options.ttlMs ?? READ_CACHE_TTL_MS;
  const now = options.now ?? (() => performance.now());
  const onWrite = options.onWrite ?? (() => {});
  const cache = { ttlMs, now, onWrite };
  const keys = cachedReads(store.keys, "findByHash", ["get", "listByTeam", "holdsAny"], cache);
  const teams = cachedReads(store.teams, "get", ["list"], cache);
  const banners = cachedReads(store.banners, "getByPublicId", ["get", "listByTeam"], cache);
  const cached = Object.create(store) as CachedStore;
  Object.defineProperties(cached, {
    keys: { value: keys.subStore },
    teams: { value: teams.subStore },
    banners: { value: banners.subStore },
    forgetCachedReads: {
      value: () => {
        // The write reported was stored before the report: the reads that refill the caches
        // start from a snapshot that holds it, not one this process took a moment before.
        store.refreshReads();
        for (const cache of [keys, teams, banners]) cache.invalidate();
      },
    },
  });
  return cached;
}

/** The store with cached reads, and a way to drop them when another process reports a write. */
export interface CachedStore extends Store {
  forgetCachedReads(): void;
}

interface Entry {
  value: unknown;
  until: number;
}

/**
 * A sub-store whose `read` method (one string argument, a record or null) is cached; `otherReads`
 * pass through; every other method is a write and drops the cache. A read that overlapped a write
 * does not fill the cache (the generation moved), so it cannot put back what the write replaced.
 */
function cachedReads<T extends object>(
  subStore: T,
  read: keyof T & string,
  otherReads: readonly string[],
  { ttlMs, now, onWrite }: { ttlMs: number; now: () => number; onWrite: () => void },
): { subStore: T; invalidate: () => void } {
  const entries = new Map<string, Entry>();
  let generation = 0;
  const invalidate = () => {
    generation++;
    entries.clear();
  };
  const readThrough = Reflect.get(subStore, read) as (id: string) => Promise<unknown>;
  async function cachedRead(id: string): Promise<unknown> {
    const entry = entries.get(id);
    if (entry && entry.until > now()) return entry.value;
    const started = generation;
    const value = await readThrough.call(subStore, id);
    if (value !== null && value !== undefined && generation === started) {
      if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value as string);
      entries.delete(id);
      entries.set(id, { value, until: now() + ttlMs });
    }
    return value;
  }
  const passThrough = new Set(otherReads);
  const proxy = new Proxy(subStore, {
    get(target, property, receiver) {
      if (property === read) return cachedRead;
      const member = Reflect.get(target, property, receiver);
      if (typeof member !== "function" || passThrough.has(property as string)) {
        return typeof member === "function" ? member.bind(target) : member;
      }
      return async (...args: unknown[]) => {
        invalidate();
        try {
          return await member.apply(target, args);
        } finally {
          invalidate();
          onWrite();
        }
      };
    },
  });
  return { subStore: proxy, invalidate };
}
