// Runs a TypeScript entry point of this package through tsx, so the bins work straight from a
// clone after `npm install` with no build step.
import { fileURLToPath } from "node:url";
import { register } from "tsx/esm/api";

// The package's own tsconfig.json, by path: tsx otherwise looks for one from the working
// directory, and run from outside the package finds none and compiles JSX for a global React
// ("React is not defined" at the first view or error consentctl prints).
register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });

export function run(entry) {
  return import(new URL(entry, import.meta.url).href);
}

/**
 * Start-up failures the service words for the operator (daemon/config.ts): bad configuration, a
 * listener that cannot open, a data directory it may not write. Each names its setting.
 */
const READABLE_NAMES = new Set(["ConfigError", "StartupError"]);

/**
 * Runs `start` and turns a start-up failure the operator can fix into one line on stderr and exit
 * code 1; anything else keeps its stack for a bug report.
 */
export async function main(program, start) {
  // A reader of the output that goes away (`npm start | head`, a log shipper restarting), or a
  // terminal that hangs up (EIO: the session ended, SIGHUP drains), leaves the service serving
  // or draining: what it would have printed is dropped, not the process.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error) => {
      if (error?.code !== "EPIPE" && error?.code !== "EIO") throw error;
    });
  }
  try {
    await start();
  } catch (error) {
    if (READABLE_NAMES.has(error?.name)) {
      process.stderr.write(`${program}: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}
