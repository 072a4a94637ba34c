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

/** Whether an environment of the data directory has been created (holds its data file). */
export async function hasDataFile(dataDir: string, directory: string): Promise<boolean> {
  return stat(path.join(dataDir, directory, DATA_FILE)).then(
    () => true,
    () => false,
  );
}
