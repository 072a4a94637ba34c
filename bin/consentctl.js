#!/usr/bin/env node
// consentctl: the operator CLI, started from its bundle (bin/bundle.js), or through tsx where no
// bundle can be kept.
import { loadBundled } from "./bundle.js";

// --debug prints stacks: through the source map they name the TypeScript sources.
if (process.argv.includes("--debug")) process.setSourceMapsEnabled(true);
const { main } =
  (await loadBundled("cli/main.tsx", "consentctl")) ??
  (await (await import("./run-ts.js")).run("../cli/main.tsx"));
await main(process.argv);
