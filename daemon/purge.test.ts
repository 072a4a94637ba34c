import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Document } from "mongodb";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FIRST_PURGE_MS, PURGE_INTERVAL_MS, purgeRound, schedulePurge } from "#daemon/purge.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import {
  emptyDatabase,
  storeOnStandIn,
  writeConcernTimedOut,
} from "#daemon/store/mongo-wire-stand-in.js";
import { DAY, shifted } from "#daemon/store/store-contract-harness.js";
import { aSubject } from "#daemon/subjects/subject-store.contract.js";
import { type FailureLine, failureWords } from "#test/support/failure-lines.js";

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

describe("a purge round that fails", () => {
  /** The lines one purge round logs, each as its level, message and cause's words. */
  async function purgeLines(answerDelete: (command: Document) => Document) {
    const { store, close } = await storeOnStandIn(
      emptyDatabase(undefined, { delete: answerDelete }),
    );
    const lines: FailureLine[] = [];
    const logger = pino(
      { level: "debug" },
      { write: (line: string) => lines.push(JSON.parse(line)) },
    );
    try {
      await purgeRound(store, () => new Date(), logger)();
      return failureWords(lines);
    } finally {
      await close();
    }
  }

  it("logs each failure by its cause: the store out of reach as a warning, another failure as an error", async () => {
    // MongoDB's answers to the three purges: a write's majority that did not answer in time
    // (the store out of reach for now), a refusal of another kind, and a purge done.
    const lines = await purgeLines((command) =>
      command.delete === "sessions"
        ? writeConcernTimedOut()
        : command.delete === "subjects"
          ? { ok: 0, code: 2, codeName: "BadValue", errmsg: "a refusal of another kind" }
          : { ok: 1, n: 0 },
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        [
          40,
          "the store cannot be reached; expired records are purged once it can",
          "waiting for replication timed out",
        ],
        [50, "purging expired records failed", "a refusal of another kind"],
      ]),
    );
    expect(lines).toHaveLength(2);
  });

  it("logs a replica set that cannot provide a majority as configured in words of its own, beside a passing outage", async () => {
    // One purge's majority that the set's configuration cannot provide (100), another's that did
    // not answer in time (64): each is its own warning.
    const lines = await purgeLines((command) =>
      command.delete === "sessions"
        ? {
            ok: 1,
            n: 0,
            writeConcernError: {
              code: 100,
              codeName: "UnsatisfiableWriteConcern",
              errmsg: "Not enough data-bearing nodes",
            },
          }
        : command.delete === "subjects"
          ? writeConcernTimedOut()
          : { ok: 1, n: 0 },
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        [
          40,
          expect.stringMatching(
            /^MongoDB's replica set cannot acknowledge majority writes \(UnsatisfiableWriteConcern\): .*the operator adds a data-bearing member/,
          ),
          "Not enough data-bearing nodes",
        ],
        [
          40,
          "the store cannot be reached; expired records are purged once it can",
          "waiting for replication timed out",
        ],
      ]),
    );
    expect(lines).toHaveLength(2);
  });
});
