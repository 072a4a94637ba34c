import { stat } from "node:fs/promises";
import path from "node:path";

/**
 * Where the embedded store keeps its files in a data directory. Names only, without lmdb itself,
 * so that what the CLI loads for every command (bootstrap.ts) can name them too.
 */

/** The durable records' environment: teams, keys, banners, subjects, the consent log, webhooks. */
export const RECORDS_DIRECTORY = "records";
/** The rate-limit counters' environment. */
export const COUNTERS_DIRECTORY = "counters";
/** The files LMDB keeps in an environment's directory: the data, and the lock (readers' table). */
export const DATA_FILE = "data.mdb";
export const LOCK_FILE = "lock.mdb";

/**
 * Whether an environment of the data directory has been created: its data file holds something.
 * LMDB creates the file and then writes its first pages; a first start ended between the two (a
 * SIGKILL, a power cut before those pages reached the disk) leaves it empty, which LMDB takes for
 * a new environment at the next read-write open. Such a file holds no record, so it is no store:
 * the start-up probe (lmdb-preflight.ts) leaves it alone, where reading it would crash, and a
 * missing identity key is made rather than reported lost.
 */
export async function hasDataFile(dataDir: string, directory: string): Promise<boolean> {
  return stat(path.join(dataDir, directory, DATA_FILE)).then(
    (info) => info.size > 0,
    () => false,
  );
}
