import type { Server, Socket } from "node:net";
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

/** A server's open connections, for a drain that must not wait on clients that never finish. */
export interface TrackedConnections {
  /**
   * Closes the connections on which the client has not sent a byte: no request or call can be in
   * flight on them (a browser's preconnect, a port check), and an HTTP server only closes a
   * connection once a request has been served on it.
   */
  closeSilent(): void;
  /** Cuts every connection still open. */
  destroyAll(): void;
}

/** Tracks `server`'s connections from now on. */
export function trackConnections(server: Server): TrackedConnections {
  const connections = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    connections.add(socket);
    socket.once("close", () => connections.delete(socket));
  });
  return {
    closeSilent() {
      for (const socket of connections) {
        if (socket.bytesRead === 0) socket.destroy();
      }
    },
    destroyAll() {
      for (const socket of connections) socket.destroy();
    },
  };
}
