import type { Database, Key } from "lmdb";

/**
 * Key layouts shared by the LMDB adapters. Keys use lmdb's default ordered-binary encoding, where
 * an array key sorts element by element, so `[teamId, …]` groups a team's rows together.
 */

/** Sorts after every encoded primitive (ordered-binary), so `[prefix, PREFIX_END]` closes a prefix range. */
export const PREFIX_END = new Uint8Array([0xff]);

/** Range options over every key that starts with `prefix`, in key order or reversed. */
export function prefixRange(
  prefix: string,
  order: "ascending" | "descending",
): { start: Key; end: Key; reverse: boolean } {
  return order === "ascending"
    ? { start: [prefix], end: [prefix, PREFIX_END], reverse: false }
    : { start: [prefix, PREFIX_END], end: [prefix], reverse: true };
}

/** `[expiresAt in ms, id]`: an expiry index sorts records by expiry, so a purge reads only the due ones. */
export type ExpiryKey = [expiresAtMs: number, id: string];

/** An index from expiry to record id; each record has exactly one entry, moved when its expiry moves. */
export type ExpiryIndex = Database<string, ExpiryKey>;

export function expiryKey(id: string, expiresAt: Date): ExpiryKey {
  return [expiresAt.getTime(), id];
}

/**
 * Due index entries one purge transaction removes at most. A transaction holds its environment's
 * write lock, and its process's event loop, while it runs (some 14 µs a record): 200,000 records
 * expiring together stalled every request for seconds, so a large purge runs as many short ones.
 */
export const PURGE_BATCH = 1_000;

/** What one purgeDue transaction did: records removed, and whether more entries may be due. */
interface PurgeBatch {
  purged: number;
  more: boolean;
}

/**
 * Removes the records of at most PURGE_BATCH due index entries, those whose expiry is at or
 * before `now`. Must run inside a write transaction of the index's environment, so that a record
 * rewritten by another process in the meantime is judged by its current expiry.
 */
function purgeDue(
  index: ExpiryIndex,
  now: Date,
  removeIfExpired: (id: string) => boolean,
): PurgeBatch {
  const due = Array.from(index.getKeys({ end: [now.getTime(), PREFIX_END], limit: PURGE_BATCH }));
  let purged = 0;
  for (const key of due) {
    index.removeSync(key);
    if (removeIfExpired(key[1])) purged++;
  }
  return { purged, more: due.length === PURGE_BATCH };
}

/**
 * Removes every record due in `index` at `now` (the purgeExpired promise of the ports), one write
 * transaction of `db` per PURGE_BATCH entries, and returns how many. Each transaction commits on
 * lmdb's write thread, so the event loop runs between them; each entry is removed by the batch
 * that meets it, so every run ends.
 */
export async function purgeExpiredIn(
  db: Pick<Database, "transaction">,
  index: ExpiryIndex,
  now: Date,
  removeIfExpired: (id: string) => boolean,
): Promise<number> {
  let purged = 0;
  for (;;) {
    const batch = await db.transaction(() => purgeDue(index, now, removeIfExpired));
    purged += batch.purged;
    if (!batch.more) return purged;
  }
}
