import type { Logger } from "pino";

/**
 * How long SIGTERM waits for accepted requests and calls before cutting the connections that
 * remain: the bound of the gateway's drain and of the daemon's.
 */
export const DRAIN_TIMEOUT_MS = 10_000;

/**
 * Ends a program once its drain on SIGTERM/SIGINT settles: exit 0, or exit 1 with the failure
 * logged (never an unhandled rejection). Shared by `npm start`'s processes and the stand-alone
 * gateway.
 */
export function exitAfterDrain(drain: Promise<unknown>, logger: Logger): void {
  drain.then(
    () => process.exit(0),
    (error: unknown) => {
      logger.error({ err: error }, "shutdown failed");
      process.exit(1);
    },
  );
}
