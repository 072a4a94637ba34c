import { afterEach, beforeEach } from "vitest";
import type { Store } from "#daemon/store/store.js";

/** Opens a store of one adapter; every call must give an empty store of its own. */
export type OpenStore = () => Promise<Store>;

/**
 * Opens a fresh store before each test of the enclosing describe and closes it after, so every
 * test starts empty and counts such as purgeExpired's are exact whatever else the suite stored.
 */
export function useFreshStore(openStore: OpenStore): () => Store {
  let store: Store | undefined;
  beforeEach(async () => {
    store = await openStore();
  });
  afterEach(async () => {
    await store?.close();
    store = undefined;
  });
  return () => {
    if (!store) throw new Error("the store is open only while a test runs");
    return store;
  };
}

/** `date` moved by `ms`: the contracts pass explicit times relative to one `now`, never sleep. */
export function shifted(date: Date, ms: number): Date {
  return new Date(date.getTime() + ms);
}

export const MINUTE = 60_000;
export const DAY = 24 * 60 * MINUTE;

/**
 * The `now` of suites whose records expire: a month ahead of the real clock. The port takes its
 * time from the caller, while a MongoDB server's TTL monitor deletes by the server's own clock
 * about once a minute; records the suite made expired by its `now` are still in the future for
 * the server, so purge counts and reads of expired records stay exact on a real server.
 */
export function aheadOfTtlMonitor(): Date {
  return shifted(new Date(), 30 * DAY);
}
