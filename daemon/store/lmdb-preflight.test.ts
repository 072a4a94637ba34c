import { mkdtemp, rm, stat, truncate } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DATA_FILE, RECORDS_DIRECTORY } from "#daemon/store/lmdb-files.js";
import { unreadableStore } from "#daemon/store/lmdb-preflight.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";

let dataDir: string | undefined;
afterEach(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  dataDir = undefined;
});

describe("the embedded store's start-up probe", () => {
  it("refuses a data file shorter than the pages its meta page counts, naming the sizes", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-preflight-"));
    const store = await openLmdbStore({ dataDir });
    await store.close();
    expect(await unreadableStore(dataDir)).toBeUndefined();

    // A byte gone from the end: no read of a database's first page need meet it (it depends on
    // where the pages lie), so the probe compares the file with the pages its meta page counts.
    const dataFile = path.join(dataDir, RECORDS_DIRECTORY, DATA_FILE);
    const { size } = await stat(dataFile);
    await truncate(dataFile, size - 1);
    expect(await unreadableStore(dataDir)).toBe(
      `data.mdb is cut short: ${size - 1} bytes of the ${size} its pages take`,
    );
  });
});
