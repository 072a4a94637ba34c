import { cp, mkdir, readdir, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { ROOT } from "#test/support/processes.js";

/** The part of the package a copy of its programs links to rather than copies. */
const LINKED = ["daemon", "gateway", "cli", "proto", "tsconfig.json"];

/**
 * A copy of the package's programs in `dir`, for startProgram's `root`: bin/ and package.json
 * copied (a program keeps its bundle in the node_modules/.cache beside the bin/ it runs from),
 * the sources and each installed package linked. Its cache starts empty, so the first start
 * builds the service's bundle there; with `unwritableCache` a file stands where the cache
 * directory belongs, as a read-only installation leaves the programs nowhere to keep a bundle
 * (a file, since this suite may run as root, whom a directory's mode does not stop).
 * Returns the cache directory, and `tmp`, an empty directory for the programs' TMPDIR: tsx caches
 * each source it compiles there, so a file in it says a program ran from its sources.
 */
export async function copyPrograms(
  dir: string,
  { unwritableCache = false }: { unwritableCache?: boolean } = {},
): Promise<{ cache: string; tmp: string }> {
  // With their times: a bundle's input saved while it is built (as a copy made just now would
  // seem) makes that start run from the sources instead.
  for (const part of ["bin", "package.json"]) {
    await cp(path.join(ROOT, part), path.join(dir, part), {
      recursive: true,
      preserveTimestamps: true,
    });
  }
  for (const part of LINKED) await symlink(path.join(ROOT, part), path.join(dir, part));
  const modules = path.join(dir, "node_modules");
  await mkdir(path.join(modules, ".cache"), { recursive: true });
  for (const entry of await readdir(path.join(ROOT, "node_modules"))) {
    if (entry === ".cache") continue;
    await symlink(path.join(ROOT, "node_modules", entry), path.join(modules, entry));
  }
  const cache = path.join(modules, ".cache", "consent-service");
  if (unwritableCache) await writeFile(cache, "");
  const tmp = path.join(dir, "tmp");
  await mkdir(tmp);
  return { cache, tmp };
}
