import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "#test/support/processes.js";

const BIN = path.join(ROOT, "node_modules", ".bin");
const COMMITTED = path.join(ROOT, "proto", "gen");

/** Runs buf from node_modules, with protoc-gen-es on the PATH; resolves even when buf fails. */
async function buf(...args: string[]) {
  try {
    const { stdout, stderr } = await promisify(execFile)(path.join(BIN, "buf"), args, {
      cwd: ROOT,
      env: { ...process.env, PATH: `${BIN}${path.delimiter}${process.env.PATH}` },
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort();
}

/**
 * The proto contract is lint-clean, and the committed proto/gen is exactly what
 * `buf generate` makes of it, so a proto edit without regeneration fails the suite.
 */
describe("proto contracts and generated code", () => {
  let out: string;
  let generated: { code: number; output: string };

  beforeAll(async () => {
    out = await mkdtemp(path.join(tmpdir(), "consent-gen-"));
    // --output roots buf.gen.yaml's `out: proto/gen` in the temp dir; the committed files stay put.
    generated = await buf("generate", "--output", out);
  });
  afterAll(() => rm(out, { recursive: true, force: true }));

  it("buf lint passes", async () => {
    const lint = await buf("lint");
    expect(lint.output).toBe("");
    expect(lint.code).toBe(0);
  });

  it("buf generate produces exactly the committed files", async () => {
    expect(generated).toEqual({ code: 0, output: "" });
    const fresh = await filesUnder(path.join(out, "proto", "gen"));
    expect(fresh).toEqual(await filesUnder(COMMITTED));
    expect(fresh).toContain("consent/v1/subject_pb.ts");
  });

  it("every committed generated file is byte-identical to a fresh generation", async () => {
    const stale: string[] = [];
    for (const file of await filesUnder(COMMITTED)) {
      const committed = await readFile(path.join(COMMITTED, file));
      const fresh = await readFile(path.join(out, "proto", "gen", file)).catch(() => undefined);
      if (!fresh || !committed.equals(fresh)) stale.push(file);
    }
    expect(stale, "regenerate with `npm run generate` and commit proto/gen").toEqual([]);
  });
});
