// Runs a TypeScript entry point from an esbuild bundle of it and its dependencies, kept in
// node_modules/.cache/consent-service/ and rebuilt when an input changes. For consentctl: Node
// loads the thousand-odd files of its module graph (zod, connect-es, protobuf, commander) in
// about a second on this hardware, with or without tsx; the bundle loads in a tenth of that. Each
// run hashes the bundle's inputs (a few milliseconds) to find the bundle built from exactly these
// sources; only a changed input costs a build (about a second).
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const PACKAGE_ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * Inputs outside the module graph that change what a build makes: the package's import map and
 * TypeScript settings, npm's record of what it installed, and these build rules.
 */
const BUILD_INPUTS = [
  "package.json",
  "tsconfig.json",
  "node_modules/.package-lock.json",
  "bin/bundle.js",
];

/**
 * A superseded bundle is removed this long after it was superseded: a process started from it may
 * still load its chunks (the views, when it first prints), so not at once.
 */
const STALE_AFTER_MS = 24 * 60 * 60 * 1000;

/** The file that marks a bundle directory superseded, dated when it was first found so. */
const SUPERSEDED = ".superseded";

/**
 * The exports of `entry` (a path relative to `root`, the package root by default), loaded from
 * its bundle. Undefined when no bundle can be kept (a read-only installation, a full disk): the
 * caller then runs the sources through tsx. A source that does not compile fails here, with
 * esbuild's message.
 *
 * With `keepNames` (the default), every class and function keeps the name it was written with
 * where the bundle renames it (CommanderError, not CommanderError2), as consentctl's errors need:
 * esbuild then wraps each function as it is made in a call that defines its `name`, which costs
 * a closure made on every request (Fastify's hook runners, connect-es' call contexts) about as
 * much as the closure itself. The service's bundle goes without (see daemon/programs.ts).
 */
export async function loadBundled(entry, name, { root = PACKAGE_ROOT, keepNames = true } = {}) {
  const cache = path.join(root, "node_modules", ".cache", "consent-service");
  const bundle = {
    root,
    cache,
    name,
    keepNames,
    manifest: path.join(cache, `${name}.inputs.json`),
  };
  const known = await readJson(bundle.manifest);
  if (Array.isArray(known?.inputs)) {
    const directory = directoryOf(bundle, await digest(root, known.inputs));
    const file = path.join(directory, "main.js");
    if (await exists(file)) {
      // In use again (sources put back as they were): no longer superseded.
      await rm(path.join(directory, SUPERSEDED), { force: true }).catch(() => {});
      return import(pathToFileURL(file).href);
    }
  }
  const built = await build(bundle, entry);
  return built && import(pathToFileURL(built).href);
}

/**
 * Builds the bundle, stores it under its inputs' digest, and returns its entry file; undefined
 * when it cannot be stored (the program then runs from its sources).
 */
async function build(bundle, entry) {
  // Where the cache cannot be made (a read-only installation), no build is worth its time.
  if (
    !(await mkdir(bundle.cache, { recursive: true }).then(
      () => true,
      () => false,
    ))
  ) {
    return undefined;
  }
  const { build: esbuild } = await import("esbuild");
  const started = Date.now();
  const result = await esbuild({
    absWorkingDir: bundle.root,
    entryPoints: [{ in: entry, out: "main" }],
    bundle: true,
    // Split at dynamic imports, so what a run does not use (Ink and React for --json) is neither
    // parsed nor evaluated.
    splitting: true,
    // Loaded from node_modules at run time. lmdb (and msgpackr, which only lmdb imports) finds its
    // native binary beside its own files; esbuild's API finds its binary the same way, and the
    // gateway runs it to build the banner runtime from gateway/runtime/ (runtime-bundle.ts).
    external: ["lmdb", "esbuild"],
    platform: "node",
    format: "esm",
    target: "node20",
    // At the depth of the stored directory, so the source maps' relative paths hold there.
    outdir: path.join(bundle.cache, bundle.name),
    write: false,
    sourcemap: "linked",
    // Without the sources' text: a stack needs only the mappings, and the sources are on disk
    // where the map names them. A third of the size, which Node parses as it loads each chunk.
    sourcesContent: false,
    metafile: true,
    // A build failure is thrown, with esbuild's messages in it.
    logLevel: "silent",
    // Bundled CommonJS packages require Node's built-in modules.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
    // Class and function names as written (CommanderError, not CommanderError2): errors and
    // stacks read as they do from the sources. See loadBundled.
    keepNames: bundle.keepNames,
    // Each module's own import.meta.url, dirname and filename, and a CommonJS module's own
    // __dirname and __filename: see sourceLocations. React's production build (the only bundled
    // packages that read NODE_ENV are React's): its development build checks and records each
    // element as it renders, which made consentctl's views of large lists several times dearer.
    define: {
      ...Object.fromEntries(LOCATIONS.map(({ expression, variable }) => [expression, variable])),
      "process.env.NODE_ENV": '"production"',
    },
    plugins: [sourceLocations, absentReactDevtools],
  });
  const inputs = inputsOf(Object.keys(result.metafile.inputs));
  const directory = directoryOf(bundle, await digest(bundle.root, inputs));
  const draft = `${directory}.${privateSuffix()}.draft`;
  try {
    await mkdir(draft);
    for (const output of result.outputFiles) {
      await writeFile(
        path.join(draft, path.relative(path.join(bundle.cache, bundle.name), output.path)),
        output.contents,
      );
    }
    // An input saved while esbuild read the sources may be newer than what was bundled: this run
    // goes from the sources, and the next one builds again.
    if (await changedSince(bundle.root, inputs, started)) {
      await rm(draft, { recursive: true, force: true });
      return undefined;
    }
    // Written whole under a private name, then renamed: a process starting at the same moment
    // finds either no bundle or a complete one.
    try {
      await rename(draft, directory);
    } catch (error) {
      // Another process stored the same bundle first.
      if (error?.code !== "ENOTEMPTY" && error?.code !== "EEXIST") throw error;
      await rm(draft, { recursive: true, force: true });
    }
    const manifestDraft = `${bundle.manifest}.${privateSuffix()}.draft`;
    await writeFile(manifestDraft, JSON.stringify({ inputs }));
    await rename(manifestDraft, bundle.manifest);
  } catch {
    // The cache is only a shortcut: where it cannot be written (read-only, full, no permission),
    // the program runs from its sources.
    await rm(draft, { recursive: true, force: true }).catch(() => {});
    return undefined;
  }
  await removeStale(bundle, directory).catch(() => {});
  return path.join(directory, "main.js");
}

/**
 * What a build depends on: the package's own source files, each bundled package's package.json
 * (its version: an upgrade by any package manager changes it), and BUILD_INPUTS.
 */
function inputsOf(bundled) {
  const inputs = new Set(BUILD_INPUTS);
  for (const input of bundled) {
    if (input.includes(":")) continue; // esbuild's virtual modules (the absent devtools)
    const dependency = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
    inputs.add(dependency ? `${dependency[1]}/package.json` : input);
  }
  return [...inputs].sort();
}

/** A name part no other build, in this process or another, is using. */
function privateSuffix() {
  return `${process.pid}-${randomBytes(4).toString("hex")}`;
}

function directoryOf(bundle, hash) {
  return path.join(bundle.cache, `${bundle.name}-${hash}`);
}

/**
 * SHA-256 over the package's location and each input's path and content (a missing input counts
 * as missing).
 */
async function digest(root, inputs) {
  const hash = createHash("sha256");
  hash.update(`${root}\0`);
  for (const input of inputs) {
    hash.update(`${input}\0`);
    try {
      hash.update(await readFile(path.join(root, input)));
    } catch {
      hash.update("\0missing");
    }
    hash.update("\0");
  }
  return hash.digest("hex").slice(0, 24);
}

/**
 * Whether an input was saved after `time` (less a second, for coarse file times) and before now.
 * A file dated in the future (a clock set back, a copy from a machine ahead) was not saved
 * during the build, and would otherwise make every run build again.
 */
async function changedSince(root, inputs, time) {
  const now = Date.now();
  for (const input of inputs) {
    const info = await stat(path.join(root, input)).catch(() => undefined);
    if (info && info.mtimeMs >= time - 1000 && info.mtimeMs <= now + 1000) return true;
  }
  return false;
}

/**
 * Removes this bundle's other versions a day after they were first found superseded, not a day
 * after they were built: a program started from one may still be loading its chunks. The first
 * finding is marked by a file in the directory. Drafts a cut-short build left go a day after.
 */
async function removeStale(bundle, current) {
  const now = Date.now();
  for (const entry of await readdir(bundle.cache)) {
    const directory = path.join(bundle.cache, entry);
    if (!entry.startsWith(`${bundle.name}-`) || directory === current) continue;
    if (entry.endsWith(".draft")) {
      // A build in progress takes seconds; one left a day ago was cut short and is never loaded.
      const info = await stat(directory).catch(() => undefined);
      if (info && now - info.mtimeMs > STALE_AFTER_MS) {
        await rm(directory, { recursive: true, force: true });
      }
      continue;
    }
    const marker = path.join(directory, SUPERSEDED);
    const marked = await stat(marker).catch(() => undefined);
    if (!marked) {
      await writeFile(marker, "", { flag: "wx" }).catch(() => {});
    } else if (now - marked.mtimeMs > STALE_AFTER_MS) {
      await rm(directory, { recursive: true, force: true });
    }
  }
}

async function readJson(file) {
  try {
    return JSON.parse(await readFile(file, "utf8"));
  } catch {
    return undefined;
  }
}

async function exists(file) {
  return Boolean(await stat(file).catch(() => undefined));
}

/**
 * The expressions that name a module's file, the variable each becomes in the bundle, and its
 * value for a module at `file`.
 */
const LOCATIONS = [
  { expression: "import.meta.url", variable: "__bundledImportMetaUrl", of: pathToFileURLText },
  { expression: "import.meta.dirname", variable: "__bundledImportMetaDirname", of: path.dirname },
  { expression: "import.meta.filename", variable: "__bundledImportMetaFilename", of: (f) => f },
  { expression: "__dirname", variable: "__bundledDirname", of: path.dirname },
  { expression: "__filename", variable: "__bundledFilename", of: (f) => f },
];

function pathToFileURLText(file) {
  return pathToFileURL(file).href;
}

/**
 * What a module sees of its own file is kept: `import.meta.url` (and `dirname`, `filename`)
 * mean the module's own file, as they do unbundled (Ink, for one, reads its package.json beside
 * it when DEV=true), and so do a CommonJS module's `__dirname` and `__filename`, which an ES
 * module bundle has no value for at all (pino would start a transport's worker thread from
 * thread-stream's lib/worker.js by it). A module that mentions one of them gets its own
 * variables with those values, declared on its first line; esbuild's `define` rewrites the
 * expressions themselves (never strings or comments, nor a `__dirname` the module declares
 * itself) to them, and each binds to its module's declaration. The digest includes where the
 * package is, so a moved checkout builds anew.
 */
const sourceLocations = {
  name: "source-locations",
  setup(build) {
    build.onLoad({ filter: /\.(?:[cm]?[jt]sx?)$/ }, async (args) => {
      const text = await readFile(args.path, "utf8");
      const mentioned = LOCATIONS.filter(({ expression }) =>
        text.includes(expression.startsWith("import.meta") ? "import.meta" : expression),
      );
      if (mentioned.length === 0) return undefined;
      const declarations = mentioned
        .map(({ variable, of }) => `var ${variable} = ${JSON.stringify(of(args.path))};`)
        .join(" ");
      const extension = path.extname(args.path).slice(1).replace(/^[cm]/, "");
      return {
        // On the first line, so the module's own lines keep their numbers in the source map.
        contents: `${declarations} ${text}`,
        loader: ["ts", "tsx", "jsx"].includes(extension) ? extension : "js",
      };
    });
  },
};

/**
 * Ink imports React DevTools' connector only when DEV=true, and reports when the package is not
 * installed (it is not a dependency). In the bundle the import fails the same way, when it runs.
 */
const absentReactDevtools = {
  name: "absent-react-devtools",
  setup(build) {
    build.onResolve({ filter: /^react-devtools-core$/ }, (args) => ({
      path: args.path,
      namespace: "absent",
    }));
    build.onLoad({ filter: /.*/, namespace: "absent" }, () => ({
      contents:
        'const error = new Error("Cannot find package \'react-devtools-core\'"); error.code = "ERR_MODULE_NOT_FOUND"; throw error;',
      loader: "js",
    }));
  },
};
