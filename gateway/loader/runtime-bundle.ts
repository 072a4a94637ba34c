import { fileURLToPath } from "node:url";
import { build } from "esbuild";

let bundle: Promise<string> | undefined;

/**
 * The banner runtime (gateway/runtime/), bundled and minified by esbuild the first time a loader
 * is served, then kept for the life of the process. Bundling at start-up rather than shipping a
 * built file means the served code is always the code in the repository (esbuild is therefore a
 * runtime dependency). The output is an IIFE that reads its configuration from the free name
 * `__CONFIG__`, which the loader binds around it.
 */
export function runtimeBundle(): Promise<string> {
  bundle ??= build({
    entryPoints: [fileURLToPath(new URL("../runtime/main.ts", import.meta.url))],
    bundle: true,
    minify: true,
    format: "iife",
    target: "es2020",
    charset: "utf8",
    legalComments: "none",
    write: false,
    logLevel: "silent",
  }).then(
    (result) => result.outputFiles[0]?.text.trim() ?? "",
    (error: unknown) => {
      bundle = undefined; // a later request may try again
      throw error;
    },
  );
  return bundle;
}
