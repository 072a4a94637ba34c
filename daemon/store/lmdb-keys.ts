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
 * Removes every record whose expiry is at or before `now` (the purgeExpired promise of the ports)
 * and returns how many. Must run inside a write transaction of the index's environment, so that a
 * record rewritten by another process in the meantime is judged by its current expiry.
 */
export function purgeDue(
  index: ExpiryIndex,
  now: Date,
  removeIfExpired: (id: string) => boolean,
): number {
  const due = Array.from(index.getKeys({ end: [now.getTime(), PREFIX_END] }));
  let purged = 0;
  for (const key of due) {
    index.removeSync(key);
    if (removeIfExpired(key[1])) purged++;
  }
  return purged;
}
