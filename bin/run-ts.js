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

/** Listen errors an operator fixes from the message alone (a taken port, a host that is none). */
const READABLE_CODES = new Set(["EADDRINUSE", "EACCES", "EADDRNOTAVAIL", "ENOTFOUND", "EAI_AGAIN"]);
/** Start-up failures the service words for the operator (daemon/config.ts). */
const READABLE_NAMES = new Set(["ConfigError", "StartupError"]);

/**
 * What the operator can do about a system error at start-up, naming the settings behind it
 * (Node's own words name a port, an address or a file, never the variable that chose it).
 */
function remedy(error) {
  const listening = error.syscall === "listen" || error.syscall === "bind";
  switch (error.code) {
    case "EADDRINUSE":
      return "another process holds that port (or CONSENT_HTTP_PORT and CONSENT_GRPC_PORT are the same); choose another";
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return "CONSENT_HTTP_HOST and CONSENT_GRPC_HOST must name an address of this machine";
    case "EACCES":
      return listening
        ? "ports below 1024 need privileges; choose a higher CONSENT_HTTP_PORT or CONSENT_GRPC_PORT"
        : "this user may not write the data directory (CONSENT_DATA_DIR)";
    default:
      return undefined;
  }
}

/**
 * Runs `start` and turns a start-up failure the operator can fix (bad configuration, a taken port)
 * into one line on stderr and exit code 1; anything else keeps its stack for a bug report.
 */
export async function main(program, start) {
  try {
    await start();
  } catch (error) {
    if (READABLE_NAMES.has(error?.name) || READABLE_CODES.has(error?.code)) {
      const fix = READABLE_CODES.has(error.code) ? remedy(error) : undefined;
      process.stderr.write(`${program}: ${error.message}${fix ? ` (${fix})` : ""}\n`);
      process.exit(1);
    }
    throw error;
  }
}
