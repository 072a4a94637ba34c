import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN_FILE, IDENTITY_KEY_FILE, loadSecrets } from "#daemon/bootstrap.js";
import { loadConfig } from "#daemon/config.js";

const RACER = fileURLToPath(new URL("../test/support/secrets-racer.ts", import.meta.url));

describe("first start's secrets", () => {
  const directories: string[] = [];
  const fresh = async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "consent-secrets-"));
    directories.push(dir);
    return loadConfig({ CONSENT_DATA_DIR: path.join(dir, "data") });
  };
  afterAll(async () => {
    for (const dir of directories) await rm(dir, { recursive: true, force: true });
  });

  it("are made once by concurrent starts in one process, with no draft left and for the owner only", async () => {
    const config = await fresh();
    const starts = await Promise.all(Array.from({ length: 4 }, () => loadSecrets(config)));
    const [first] = starts;
    expect(first?.operatorToken).toMatch(/\S{20,}/);
    expect(first?.identityProblem).toBeUndefined();
    for (const secrets of starts) {
      expect(secrets.operatorToken).toBe(first?.operatorToken);
      expect(secrets.identityKeys).toEqual(first?.identityKeys);
      expect(secrets.identityProblem).toBeUndefined();
    }
    // One start created each file; no draft is left beside them.
    expect(starts.flatMap((secrets) => secrets.created)).toHaveLength(2);
    expect((await readdir(config.dataDir)).sort()).toEqual([ADMIN_TOKEN_FILE, IDENTITY_KEY_FILE]);
    expect((await stat(path.join(config.dataDir, ADMIN_TOKEN_FILE))).mode & 0o777).toBe(0o600);
  });

  // Regression: a start that found the file created read it before its creator had written it,
  // and ran with an empty operator token or an empty identity key. Only separate processes
  // interleave finely enough to show it (starts in one process did not, in 300 rounds).
  it("are one and whole for every process starting at once on a new data directory", async () => {
    const racers = Array.from({ length: 4 }, () => {
      const child = spawn(process.execPath, ["--import", "tsx", RACER], {
        stdio: ["pipe", "pipe", "inherit"],
      });
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      return { child, next: async () => String((await lines.next()).value) };
    });
    try {
      for (const racer of racers) expect(await racer.next()).toBe("ready");
      for (let round = 0; round < 40; round++) {
        const { dataDir } = await fresh();
        for (const racer of racers) racer.child.stdin.write(`go ${dataDir}\n`);
        const answers = await Promise.all(
          racers.map(async (racer) => JSON.parse(await racer.next())),
        );
        const [first] = answers;
        expect(first).toMatchObject({
          token: expect.stringMatching(/\S{20,}/),
          keys: 1,
          problem: null,
        });
        for (const answer of answers) expect(answer).toEqual(first);
      }
    } finally {
      for (const racer of racers) racer.child.kill();
    }
  }, 60_000);

  it("are only read once they exist: nothing is written, so the directory may be read-only", async () => {
    const config = await fresh();
    const first = await loadSecrets(config);
    const before = (await stat(config.dataDir, { bigint: true })).mtimeNs;
    await new Promise((resolve) => setTimeout(resolve, 20));
    const again = await loadSecrets(config);
    expect(again).toMatchObject({ operatorToken: first.operatorToken, created: [] });
    expect(again.identityKeys).toEqual(first.identityKeys);
    // A file made or removed in it (a draft) would have moved the directory's mtime.
    expect((await stat(config.dataDir, { bigint: true })).mtimeNs).toBe(before);
  });

  it.each([ADMIN_TOKEN_FILE, IDENTITY_KEY_FILE])(
    "refuse a directory where %s belongs, in one sentence naming it",
    async (name) => {
      const config = await fresh();
      await loadSecrets(config);
      const file = path.join(config.dataDir, name);
      await rm(file);
      await mkdir(file);
      await expect(loadSecrets(config)).rejects.toMatchObject({
        name: "StartupError",
        message: `cannot read ${file}: it is a directory, where the file belongs; move it away`,
      });
    },
  );

  it("refuse an empty operator token file rather than run with an empty credential", async () => {
    const config = await fresh();
    await loadSecrets(config);
    const file = path.join(config.dataDir, ADMIN_TOKEN_FILE);
    await writeFile(file, "\n");
    await expect(loadSecrets(config)).rejects.toThrow(`${file} is empty`);
    expect(await readFile(file, "utf8")).toBe("\n");
  });
});
