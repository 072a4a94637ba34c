// Reads the root of each embedded-store environment named on the command line, as the daemon's
// first reads will: run by lmdb-preflight.ts in a process of its own, since a damaged data file
// ends the process that maps it with a signal (SIGBUS, SIGSEGV) that no JavaScript can catch.
// Plain JavaScript, so it starts without a TypeScript loader.
import { statSync } from "node:fs";
import { join } from "node:path";
import { open } from "lmdb";

for (const path of process.argv.slice(2)) {
  // Owner-only, as the service makes its files: a lock file made here is the one it keeps.
  const env = open({ path, readOnly: true, maxDbs: 64, permissionsMode: 0o600 });
  try {
    // A file cut short past the pages its meta page counts: whether the reads below meet the
    // missing part depends on where the databases' pages happen to lie, so it is checked whole.
    const { lastPageNumber, pageSize } = env.getStats();
    const pagesTake = (lastPageNumber + 1) * pageSize;
    const { size } = statSync(join(path, "data.mdb"));
    if (size < pagesTake) {
      throw new Error(`data.mdb is cut short: ${size} bytes of the ${pagesTake} its pages take`);
    }
    // The root database lists the named ones; each is opened and its first key read.
    const names = Array.from(env.getKeys(), String);
    for (const name of names) {
      for (const _ of env.openDB({ name }).getKeys({ limit: 1 }));
    }
  } finally {
    env.close();
  }
}
