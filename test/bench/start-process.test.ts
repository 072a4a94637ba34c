import { once } from "node:events";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startProcess } from "../../bench/service.js";

/** The benchmark's programs log under bench/results/, which a fresh clone does not have. */
describe("bench startProcess", () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "consent-bench-start-"));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("makes the log file's missing folder and writes the program's output there", async () => {
    const logFile = path.join(root, "results", "nested", "transport-hop.log");
    const child = startProcess("echo", ["-e", "console.log('ready')"], { env: {}, logFile });
    const [code] = await once(child, "exit");
    expect(code).toBe(0);
    // The pipe into the log may still be flushing after the exit.
    let log = "";
    for (let tries = 0; tries < 50 && !log.includes("ready"); tries++) {
      log = await readFile(logFile, "utf8").catch(() => "");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(log).toMatch(/^--- echo \(pid \d+\): node -e console\.log\('ready'\)\nready\n$/);
  });
});
