import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { COUNTERS_DIRECTORY, hasDataFile, RECORDS_DIRECTORY } from "#daemon/store/lmdb-files.js";

const PROBE = fileURLToPath(new URL("./lmdb-probe.mjs", import.meta.url));

/**
 * Why the embedded store's existing files cannot be read, or undefined when they can (or when
 * there are none yet). LMDB maps its data file into memory: one cut short (a copy interrupted,
 * a full disk during a restore) or overwritten ends the process that reads it with SIGBUS or
 * SIGSEGV, with no message, and so does a lock file it may not use. So before the service opens
 * the store, a process of its own reads each environment's root (lmdb-probe.mjs), and a failure
 * there becomes a sentence the operator can act on. It costs a start about a third of a second.
 */
export async function unreadableStore(dataDir: string): Promise<string | undefined> {
  const present: string[] = [];
  for (const directory of [RECORDS_DIRECTORY, COUNTERS_DIRECTORY]) {
    if (await hasDataFile(dataDir, directory)) present.push(path.join(dataDir, directory));
  }
  if (present.length === 0) return undefined;
  try {
    await promisify(execFile)(process.execPath, [PROBE, ...present], { timeout: 60_000 });
    return undefined;
  } catch (error) {
    const failure = error as { signal?: string | null; stderr?: string; killed?: boolean };
    if (failure.killed && failure.signal === "SIGTERM") return undefined; // too slow to judge
    if (failure.signal) return `the process reading it crashed (${failure.signal})`;
    const reason =
      /^(?:Error: )?(MDB_\w+: .*|data\.mdb is cut short: .*|.*(?:EACCES|EPERM).*)$/m.exec(
        failure.stderr ?? "",
      );
    return reason?.[1] ?? "reading it failed";
  }
}
