import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FIRST_PURGE_MS, PURGE_INTERVAL_MS, schedulePurge } from "#daemon/purge.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { DAY, shifted } from "#daemon/store/store-contract-harness.js";
import { aSubject } from "#daemon/subjects/subject-store.contract.js";

describe("the purge schedule", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("removes expired subject states a minute after start, and again every interval", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "consent-purge-"));
    const store = await openLmdbStore({ dataDir });
    const now = new Date();
    // A record written two days ago with a day to live: expired, still stored.
    const write = async () => {
      const expired = aSubject(`ik_1:${randomUUID()}`, 1, shifted(now, -2 * DAY));
      await store.subjects.write(expired, 0, shifted(now, -2 * DAY));
      return expired.subjectHash;
    };
    const stored = (hash: string) => store.subjects.find([hash], shifted(now, -2 * DAY));
    vi.useFakeTimers({ toFake: ["setTimeout", "setInterval"] });
    const stop = schedulePurge(store, () => now, pino({ level: "silent" }));
    try {
      const first = await write();
      await vi.advanceTimersByTimeAsync(FIRST_PURGE_MS - 1_000);
      expect(await stored(first)).not.toBeNull();
      await vi.advanceTimersByTimeAsync(1_000);
      await vi.waitFor(async () => expect(await stored(first)).toBeNull());

      const second = await write();
      await vi.advanceTimersByTimeAsync(PURGE_INTERVAL_MS);
      await vi.waitFor(async () => expect(await stored(second)).toBeNull());
    } finally {
      stop();
      await store.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
