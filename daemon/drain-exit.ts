import type { Server, Socket } from "node:net";
import type { Logger } from "pino";

/**
 * How long before the cut a drain's last answers are made (the gateway's 503s) and a daemon's
 * webhook attempts still in flight are cut, leaving time to record them and close the store.
 */
export const BEFORE_CUT_MS = 500;

/**
 * Ends a program once its drain on a stop signal settles: exit 0, or exit 1 with the failure
 * logged (never an unhandled rejection); after SIGHUP, by that signal (endByHangUp). Shared by
 * `npm start`'s processes and the stand-alone gateway.
 */
function exitAfterDrain(drain: Promise<unknown>, logger: Logger, signal: string): void {
  drain.then(
    () => (signal === "SIGHUP" ? endByHangUp() : process.exit(0)),
    (error: unknown) => {
      logger.error({ err: error }, "shutdown failed");
      process.exit(1);
    },
  );
}

/**
 * Ends a drained process by SIGHUP itself, as a program the hang-up ends by default does (status
 * 129 to a shell). Its terminal is usually gone by then, and Node 20's exit restores the
 * terminal's settings, which aborts the process when the terminal cannot be written
 * (nodejs/node#51519, fixed in later majors): ended by the signal, Node runs no such step.
 * Should the signal not end it, it exits 0 a second later.
 */
export function endByHangUp(): void {
  process.removeAllListeners("SIGHUP");
  setTimeout(() => process.exit(0), 1_000);
  process.kill(process.pid, "SIGHUP");
}

/** What a process registers once it serves: its drain, run on the first stop signal. */
export interface StopOnSignals {
  started(drain: (signal: string) => Promise<unknown>): void;
}

/** The signals that drain a program: a supervisor's stop, Ctrl-C, and a terminal closing. */
export const STOP_SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/**
 * STOP_SIGNALS handling, installed before start-up so a signal during it is not the default exit
 * (code 143): the first signal drains what `started` registers, at once or as soon as start-up
 * has registered it, then exits (exitAfterDrain). A second signal during a drain
 * changes nothing: Ctrl-C reaches a worker directly and through its primary, and `timeout`
 * signals a child and then its process group. A second signal while start-up has not finished
 * (a store that does not answer) ends the process at once, with exit code 1: nothing serves yet.
 */
export function stopOnSignals(logger: Logger): StopOnSignals {
  let drain: ((signal: string) => Promise<unknown>) | undefined;
  let received: string | undefined;
  const begin = (signal: string, run: (signal: string) => Promise<unknown>) => {
    logger.info({ signal }, "draining and shutting down");
    exitAfterDrain(run(signal), logger, signal);
  };
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (received) {
        if (!drain) {
          logger.warn({ signal }, "stopped during start-up");
          process.exit(1);
        }
        return;
      }
      received = signal;
      if (drain) begin(signal, drain);
    });
  }
  return {
    started(run) {
      drain = run;
      if (received) begin(received, run);
    },
  };
}

/**
 * Tracks `server`'s connections from now on, for a drain that must not wait on clients that never
 * finish. The returned function begins the drain's bound: the connections on which the client
 * has not sent a byte are closed at once (no request or call can be in flight on them: a
 * browser's preconnect, a port check; an HTTP server only closes a connection once a request has
 * been served on it), and whatever is still open after `limitMs` (CONSENT_DRAIN_TIMEOUT_MS, the
 * bound of the gateway's drain and of the daemon's) is cut, unless the server has closed by then.
 * `beforeCut` runs BEFORE_CUT_MS earlier, to answer what can still be answered.
 */
export function boundedDrain(server: Server, limitMs: number, beforeCut?: () => void): () => void {
  const connections = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
  });
  return () => {
    for (const socket of connections) {
      if (socket.bytesRead === 0) socket.destroy();
    }
    const last = beforeCut && setTimeout(beforeCut, limitMs - BEFORE_CUT_MS);
    const cut = setTimeout(() => {
      for (const socket of connections) socket.destroy();
    }, limitMs);
    server.once("close", () => {
      clearTimeout(last);
      clearTimeout(cut);
    });
  };
}
