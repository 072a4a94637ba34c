import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadBundled } from "../../bin/bundle.js";

/**
 * bin/bundle.js, which consentctl starts from: a bundle is built once for its inputs, found again
 * by their content, rebuilt when one changes, and never stored from sources that changed while
 * it was built. Each case works on a small package of its own in a temp dir.
 */
describe("the bundle a program starts from", () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "consent-bundle-"));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  const ONE_DAY_MS = 24 * 60 * 60 * 1000;

  /** A package whose entry re-exports `value` from a second module. */
  async function aPackage(name: string, value: number) {
    const dir = path.join(root, name);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, "package.json"), '{ "type": "module" }\n');
    await writeFile(
      path.join(dir, "entry.ts"),
      'import { value } from "./value.js";\nexport const answer: number = value;\n',
    );
    await setValue(dir, value);
    return dir;
  }

  /** Rewrites the second module, dated a minute ago (as a file saved before the run). */
  async function setValue(dir: string, value: number) {
    await writeFile(path.join(dir, "value.ts"), `export const value: number = ${value};\n`);
    for (const file of ["package.json", "entry.ts", "value.ts"]) {
      await dateBack(path.join(dir, file), 60_000);
    }
  }

  async function dateBack(file: string, ms: number) {
    const time = new Date(Date.now() - ms);
    await utimes(file, time, time);
  }

  /**
   * Makes `entry` (its lines) the package's entry.ts, beside a dependency `name` in its
   * node_modules: a package.json with `manifest`, and `files` (name → text). All are dated a
   * minute ago. Returns the dependency's directory.
   */
  async function withDependency(
    dir: string,
    name: string,
    manifest: Record<string, unknown>,
    files: Record<string, string>,
    entry: string[],
  ) {
    const dependency = path.join(dir, "node_modules", name);
    await mkdir(dependency, { recursive: true });
    const written = {
      [path.join(dependency, "package.json")]: JSON.stringify({
        name,
        version: "1.0.0",
        ...manifest,
      }),
      ...Object.fromEntries(
        Object.entries(files).map(([file, text]) => [path.join(dependency, file), text]),
      ),
      [path.join(dir, "entry.ts")]: entry.join("\n"),
    };
    for (const [file, text] of Object.entries(written)) {
      await writeFile(file, text);
      await dateBack(file, 60_000);
    }
    return dependency;
  }

  const cacheOf = (dir: string) => path.join(dir, "node_modules", ".cache", "consent-service");
  const bundlesIn = async (dir: string) =>
    (await readdir(cacheOf(dir))).filter((entry) => entry.startsWith("app-")).sort();
  const manifestOf = (dir: string) => stat(path.join(cacheOf(dir), "app.inputs.json"));

  it("builds once, finds the same bundle again, and builds anew when an input changes", async () => {
    const dir = await aPackage("changes", 1);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    const [first] = await bundlesIn(dir);
    expect(first).toMatch(/^app-[0-9a-f]{24}$/);
    const written = await manifestOf(dir);

    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    expect(await bundlesIn(dir)).toEqual([first]);
    // Nothing was built: the list of inputs is the same file, untouched.
    expect(await manifestOf(dir)).toMatchObject({ ino: written.ino, mtimeMs: written.mtimeMs });

    await setValue(dir, 2);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 2 });
    const afterChange = await bundlesIn(dir);
    expect(afterChange).toHaveLength(2);
    expect(afterChange).toContain(first);

    // A superseded bundle stays a day after it was superseded (a running program may still
    // load its chunks), however old it is, then goes.
    const marker = path.join(cacheOf(dir), first as string, ".superseded");
    expect((await stat(marker)).isFile()).toBe(true);
    // Sources put back as they were: the first bundle is in use again, and superseded no more.
    await setValue(dir, 1);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    await expect(stat(marker)).rejects.toMatchObject({ code: "ENOENT" });
    // Superseded again by the next build, and removed a day after that.
    await setValue(dir, 3);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 3 });
    expect((await stat(marker)).isFile()).toBe(true);
    await dateBack(marker, ONE_DAY_MS + 60_000);
    await setValue(dir, 4);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 4 });
    const afterExpiry = await bundlesIn(dir);
    // The bundles of 2, 3 and 4: the first two superseded, but less than a day ago.
    expect(afterExpiry).toHaveLength(3);
    expect(afterExpiry).not.toContain(first);
  });

  it("keeps a bundle built long ago for a day after a newer one replaces it", async () => {
    const dir = await aPackage("long-lived", 1);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    const [old] = await bundlesIn(dir);
    // Built two days ago, in use until now.
    await dateBack(path.join(cacheOf(dir), old as string), 2 * ONE_DAY_MS);
    await setValue(dir, 2);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 2 });
    expect(await bundlesIn(dir)).toContain(old);
  });

  it("runs from the sources, storing nothing, when an input is saved while it builds", async () => {
    const dir = await aPackage("busy", 1);
    // Dated now: saved while esbuild was reading the sources.
    const now = new Date();
    await utimes(path.join(dir, "value.ts"), now, now);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toBeUndefined();
    expect(await bundlesIn(dir)).toEqual([]);
    await expect(manifestOf(dir)).rejects.toMatchObject({ code: "ENOENT" });

    await setValue(dir, 1);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    expect(await bundlesIn(dir)).toEqual([expect.stringMatching(/^app-[0-9a-f]{24}$/)]);
  });

  it("stores a bundle whose inputs are dated in the future (a clock set back), once", async () => {
    const dir = await aPackage("ahead", 1);
    const later = new Date(Date.now() + 60 * 60_000);
    await utimes(path.join(dir, "value.ts"), later, later);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ answer: 1 });
    expect(await bundlesIn(dir)).toEqual([expect.stringMatching(/^app-[0-9a-f]{24}$/)]);
  });

  it("stores one whole bundle when several starts build at once", async () => {
    const dir = await aPackage("racing", 7);
    const loaded = await Promise.all(
      Array.from({ length: 4 }, () => loadBundled("entry.ts", "app", { root: dir })),
    );
    for (const exports of loaded) expect(exports).toMatchObject({ answer: 7 });
    const bundles = await bundlesIn(dir);
    expect(bundles).toHaveLength(1);
    expect(await readdir(path.join(cacheOf(dir), bundles[0] as string))).toEqual(
      expect.arrayContaining(["main.js", "main.js.map"]),
    );
  });

  it("builds anew when a bundled dependency changes version", async () => {
    const dir = await aPackage("upgrade", 1);
    const dependency = path.join(dir, "node_modules", "greeting");
    await mkdir(dependency, { recursive: true });
    const install = async (version: string, text: string) => {
      await writeFile(
        path.join(dependency, "package.json"),
        JSON.stringify({ name: "greeting", version, type: "module", main: "index.js" }),
      );
      await writeFile(path.join(dependency, "index.js"), `export const greeting = "${text}";\n`);
      for (const file of ["package.json", "index.js"]) {
        await dateBack(path.join(dependency, file), 60_000);
      }
    };
    await install("1.0.0", "hello");
    await writeFile(
      path.join(dir, "entry.ts"),
      'export { greeting } from "greeting";\nexport { value as answer } from "./value.js";\n',
    );
    await dateBack(path.join(dir, "entry.ts"), 60_000);
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({
      greeting: "hello",
    });

    await install("2.0.0", "hi");
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({ greeting: "hi" });
    expect(await bundlesIn(dir)).toHaveLength(2);
  });

  it("keeps what a module sees of itself: its own file's URL and its classes' names", async () => {
    const dir = await aPackage("locations", 1);
    const dependency = await withDependency(
      dir,
      "notes",
      { type: "module", main: "index.js" },
      {
        // As Ink reads its own package.json when DEV=true: a file beside the module.
        "note.txt": "beside the module",
        "index.js": [
          'import { readFileSync } from "node:fs";',
          'export const note = readFileSync(new URL("./note.txt", import.meta.url), "utf8");',
          "export const here = import.meta.dirname;",
          'export const words = "pass import.meta.url to createRequire";',
          "export class Reading {}",
        ].join("\n"),
      },
      // A class of the same name in the entry: the bundle must rename one of the two.
      [
        'import { here, note, Reading as TheirReading, words } from "notes";',
        "class Reading {}",
        "export const names = [new Reading().constructor.name, new TheirReading().constructor.name];",
        "export { here, note, words };",
      ],
    );
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({
      note: "beside the module",
      here: dependency,
      // Strings that mention it are left as written.
      words: "pass import.meta.url to createRequire",
      names: ["Reading", "Reading"],
    });
  });

  it("keeps a CommonJS module's own __dirname and __filename, and leaves a module's own __dirname its own", async () => {
    const dir = await aPackage("commonjs", 1);
    const dependency = await withDependency(
      dir,
      "worker-host",
      { main: "index.js" },
      {
        // As thread-stream finds the worker a pino transport runs: a file beside the module.
        "worker.txt": "the worker",
        "index.js": [
          'const { readFileSync } = require("node:fs");',
          'const { join } = require("node:path");',
          'exports.worker = readFileSync(join(__dirname, "worker.txt"), "utf8");',
          "exports.file = __filename;",
        ].join("\n"),
      },
      [
        'import host from "worker-host";',
        'const __dirname = "declared here";',
        "export const { worker, file } = host;",
        "export const own = __dirname;",
      ],
    );
    expect(await loadBundled("entry.ts", "app", { root: dir })).toMatchObject({
      worker: "the worker",
      file: path.join(dependency, "index.js"),
      own: "declared here",
    });
  });

  // Without kept names (the service's bundle, bin/run-ts.js loadService), a function the bundle
  // renamed (three modules' `fail`) is still named as written where Node finds the name in the
  // source map at its caller's call site.
  it.each([
    { keepNames: true, name: "stack" },
    { keepNames: false, name: "stack-renamed" },
  ])(
    "names the TypeScript function, source and line in a program's stack (bin/run-ts.js main), keepNames $keepNames",
    async ({ keepNames, name }) => {
      const dir = await aPackage(name, 1);
      const sources = {
        "other.ts": 'export function fail(): string {\n  return "not this one";\n}\n',
        "value.ts":
          'export function fail(): never {\n  throw new Error("failed in the bundle");\n}\n',
        "entry.ts": [
          'import { fail as other } from "./other.js";',
          'import { fail as failing } from "./value.js";',
          "export function fail(): void {",
          "  other();",
          "  failing();",
          "}",
          "",
        ].join("\n"),
      };
      for (const [file, text] of Object.entries(sources)) {
        await writeFile(path.join(dir, file), text);
        await dateBack(path.join(dir, file), 60_000);
      }
      const bin = (file: string) =>
        JSON.stringify(new URL(`../../bin/${file}`, import.meta.url).href);
      const options = JSON.stringify({ root: dir, keepNames });
      const script = [
        `import { main } from ${bin("run-ts.js")};`,
        `import { loadBundled } from ${bin("bundle.js")};`,
        `await main("app", async () => (await loadBundled("entry.ts", "app", ${options})).fail());`,
      ].join("\n");
      const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, ["--input-type=module", "--eval", script], (error, _, stderr) =>
          resolve({ code: error ? (error.code as number) : 0, stderr }),
        );
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain("failed in the bundle");
      expect(run.stderr).toContain(`fail (${path.join(dir, "value.ts")}:2:9)`);
      // The name Node finds is the one at the caller's call site: called from outside the bundle
      // (here, the script), a renamed function keeps the bundle's name, its place still mapped.
      const frame = run.stderr
        .split("\n")
        .find((line) => line.includes(`(${path.join(dir, "entry.ts")}:5:3)`));
      expect(frame).toMatch(keepNames ? /at (Module\.)?fail \(/ : /at (Module\.)?fail\d* \(/);
      // The bundle exists: the stack was mapped from it, not read from the sources; two of the
      // three functions were renamed in it.
      const bundles = await bundlesIn(dir);
      expect(bundles).toEqual([expect.stringMatching(/^app-[0-9a-f]{24}$/)]);
      const main = await readFile(path.join(cacheOf(dir), bundles[0] as string, "main.js"), "utf8");
      expect(main).toMatch(/function fail2\(/);
    },
  );

  it("runs nothing from a cache it cannot write, so the caller runs the sources", async () => {
    const dir = await aPackage("unwritable", 1);
    // A file where the cache directory belongs: nothing can be made inside it.
    await mkdir(path.join(dir, "node_modules", ".cache"), { recursive: true });
    await writeFile(cacheOf(dir), "");
    expect(await loadBundled("entry.ts", "app", { root: dir })).toBeUndefined();
  });

  it("reports a source that does not compile with esbuild's message", async () => {
    const dir = await aPackage("broken", 1);
    await writeFile(path.join(dir, "value.ts"), "export const value: number = ;\n");
    await expect(loadBundled("entry.ts", "app", { root: dir })).rejects.toThrow(
      /value\.ts:1:\d+: ERROR/,
    );
  });
});
