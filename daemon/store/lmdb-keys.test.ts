import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { open, type RootDatabase } from "lmdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ExpiryIndex,
  expiryKey,
  PURGE_BATCH,
  purgeExpiredIn,
} from "#daemon/store/lmdb-keys.js";

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

  it("removes at most PURGE_BATCH entries a transaction, in as many transactions as it takes", async () => {
    const at = new Date("2026-11-27T12:00:00.000Z");
    const due = 2 * PURGE_BATCH + 500;
    await root.transaction(() => {
      for (let i = 0; i < due; i++) index.putSync(expiryKey(`r${i}`, at), true as never);
      index.putSync(expiryKey("later", new Date(at.getTime() + 1)), true as never);
    });
    let removed = 0;
    const sizes: number[] = [];
    // The environment's transactions, each noting how many records it removed.
    const counted = {
      transaction<T>(action: () => T): Promise<T> {
        return root.transaction(() => {
          const before = removed;
          const result = action();
          sizes.push(removed - before);
          return result;
        });
      },
    } as Pick<RootDatabase, "transaction">;
    const purged = await purgeExpiredIn(counted, index, at, () => {
      removed += 1;
      return true;
    });
    expect(purged).toBe(due);
    expect(sizes).toEqual([PURGE_BATCH, PURGE_BATCH, 500]);
    expect(Array.from(index.getKeys())).toEqual([expiryKey("later", new Date(at.getTime() + 1))]);
  });
});
