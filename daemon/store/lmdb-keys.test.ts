import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { open, type RootDatabase } from "lmdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ExpiryIndex,
  expiryKey,
  PURGE_BATCH,
  purgeDue,
  purgeInBatches,
} from "#daemon/store/lmdb-keys.js";
import { turnsDuring } from "#test/support/event-loop.js";

describe("purging an expiry index: short transactions, however many records are due", () => {
  let dir: string;
  let root: RootDatabase;
  let index: ExpiryIndex;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "consent-purge-"));
    root = open({ path: dir });
    index = root.openDB({ name: "by-expiry" }) as unknown as ExpiryIndex;
  });
  afterAll(async () => {
    await root.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("removes at most PURGE_BATCH entries a transaction and lets the event loop run between them", async () => {
    const at = new Date("2026-11-27T12:00:00.000Z");
    const due = 2 * PURGE_BATCH + 500;
    await root.transaction(() => {
      for (let i = 0; i < due; i++) index.putSync(expiryKey(`r${i}`, at), true as never);
      index.putSync(expiryKey("later", new Date(at.getTime() + 1)), true as never);
    });
    const removed: string[] = [];
    const sizes: number[] = [];
    const { result: purged, turns } = await turnsDuring(() =>
      purgeInBatches(() =>
        root.transaction(() => {
          const before = removed.length;
          const batch = purgeDue(index, at, (id) => removed.push(id) > 0);
          sizes.push(removed.length - before);
          return batch;
        }),
      ),
    );
    expect(purged).toBe(due);
    expect(sizes).toEqual([PURGE_BATCH, PURGE_BATCH, 500]);
    // The event loop ran between the transactions (a request is served in between).
    expect(turns).toBeGreaterThanOrEqual(sizes.length);
    expect(Array.from(index.getKeys())).toEqual([expiryKey("later", new Date(at.getTime() + 1))]);
  });
});
