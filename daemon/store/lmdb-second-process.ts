import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { CounterStore } from "#daemon/limits/counter-store.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { SubjectRecord, SubjectStore } from "#daemon/subjects/subject-store.js";

/**
 * The second daemon of the cross-process tests in store.test.ts, run as
 * `node --import tsx daemon/store/lmdb-second-process.ts <dataDir> <task> <args…>`. It opens the
 * LMDB store in dataDir, prints "ready", waits for "go" on stdin (so both processes start
 * together), runs the task and prints its result as one JSON line. Tasks:
 *   increment <name> <expiresAt ISO> <times>
 *   write-subject <record JSON> <attempts>
 *   revoke-key <key id>
 * The test process runs the same task functions, exported below, against its own store;
 * read-cache.test.ts runs revoke-key to its end while its own process waits.
 */

/** Increments the counter `times` times, ten at a time, so both processes' commits interleave. */
export async function incrementMany(
  counters: CounterStore,
  name: string,
  expiresAt: Date,
  times: number,
): Promise<void> {
  for (let done = 0; done < times; done += 10) {
    const batch = Math.min(10, times - done);
    await Promise.all(
      Array.from({ length: batch }, () => counters.increment(name, expiresAt, new Date())),
    );
  }
}

/** Makes `attempts` concurrent baseVersion-0 writes of `record`; counts the outcomes. */
export async function writeSubjectConcurrently(
  subjects: SubjectStore,
  record: SubjectRecord,
  attempts: number,
): Promise<Record<string, number>> {
  const results = await Promise.all(
    Array.from({ length: attempts }, () => subjects.write(record, 0, new Date())),
  );
  const outcomes: Record<string, number> = {};
  for (const { outcome } of results) outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  return outcomes;
}

/** A SubjectRecord sent as JSON, with its dates revived. */
function parseSubject(json: string): SubjectRecord {
  const record = JSON.parse(json) as SubjectRecord;
  return {
    ...record,
    updatedAt: new Date(record.updatedAt),
    expiresAt: new Date(record.expiresAt),
  };
}

async function main([dataDir = "", task, ...args]: string[]): Promise<void> {
  const store = await openLmdbStore({ dataDir });
  const stdin = createInterface({ input: process.stdin });
  console.log("ready");
  await stdin[Symbol.asyncIterator]().next(); // "go"
  stdin.close();
  let result: unknown;
  if (task === "increment") {
    const [name = "", expiresAt = "", times = "0"] = args;
    await incrementMany(store.counters, name, new Date(expiresAt), Number(times));
  } else if (task === "write-subject") {
    const [record = "", attempts = "0"] = args;
    result = await writeSubjectConcurrently(store.subjects, parseSubject(record), Number(attempts));
  } else if (task === "revoke-key") {
    const [id = ""] = args;
    result = (await store.keys.revoke(id, new Date()))?.revokedAt;
  } else {
    throw new Error(`unknown task ${task}`);
  }
  await store.close();
  console.log(JSON.stringify(result ?? null));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await main(process.argv.slice(2));
}
