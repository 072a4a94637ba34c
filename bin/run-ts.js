// Runs a TypeScript entry point of this package from its bundle (bin/bundle.js), or through tsx
// where no bundle can be kept, so the bins work straight from a clone after `npm install` with no
// build step.
import { fileURLToPath } from "node:url";
import { loadBundled } from "./bundle.js";

/**
 * The exports of `entry` (a path from the package root), from the bundle named `name` (built
 * with `options`, see loadBundled); through tsx where no bundle can be kept (a read-only
 * installation, a full disk).
 */
export async function load(entry, name, options) {
  return (await loadBundled(entry, name, options)) ?? (await run(`../${entry}`));
}

/**
 * The service's programs (daemon/programs.ts), one bundle for npm start, consentd and the
 * gateway. Built without keeping names: the service makes closures on every request, and
 * naming each as it is made cost a twentieth of a request's CPU in profiles of the benchmark's
 * routes. Nothing of the service reads a name the bundle may change: its errors name
 * themselves (`name` set in each class, as the libraries' do), and a logged error's `type` is
 * taken from that name (daemon/logging.ts). A stack's frames keep their TypeScript file and line;
 * Node names each from the source map at its caller's call site, so a function the bundle renamed
 * shows the bundle's name (`fail3`) only where it was called from outside the bundle.
 */
export function loadService() {
  return load("daemon/programs.ts", "service", { keepNames: false });
}

/** tsx's loader, registered by the first run(): loading tsx takes a fifth of a second or more. */
let registered;

/** The exports of `entry` (a path from this directory), compiled by tsx as Node loads it. */
export async function run(entry) {
  // The package's own tsconfig.json, by path: tsx otherwise looks for one from the working
  // directory, and run from outside the package finds none and compiles JSX for a global React
  // ("React is not defined" at the first view or error consentctl prints).
  registered ??= import("tsx/esm/api").then(({ register }) =>
    register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) }),
  );
  await registered;
  return import(new URL(entry, import.meta.url).href);
}

/**
 * Start-up failures the service words for the operator (daemon/config.ts): bad configuration, a
 * listener that cannot open, a data directory it may not write. Each names its setting.
 */
const READABLE_NAMES = new Set(["ConfigError", "StartupError"]);

/**
 * Runs `start` and turns a start-up failure the operator can fix into one line on stderr and exit
 * code 1; anything else keeps its stack for a bug report, and a stack (a crash, an error the log
 * records) names the TypeScript sources, from the bundle through its source map as through tsx.
 */
export async function main(program, start) {
  process.setSourceMapsEnabled(true);
  // A stop signal that arrives while the program is still loading (a fraction of a second from
  // its bundle, a second or more while it builds one or through tsx)
  // would otherwise end it by the signal (exit status 143 or 130 to a supervisor). Until the
  // program installs its own handling (daemon/drain-exit.ts, daemon/workers.ts), nothing is open
  // yet: no data file written, no store opened, no port bound (a bundle whose build it cuts short
  // stays a draft, never loaded), so it ends at once with exit code 0.
  // Once that handling is installed, this listener is no longer the only one and leaves the
  // signal to it. SIGHUP keeps its default, ending the process by the hang-up as after a drain.
  for (const signal of ["SIGTERM", "SIGINT"]) {
    process.on(signal, () => {
      if (process.listenerCount(signal) === 1) process.exit(0);
    });
  }
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
