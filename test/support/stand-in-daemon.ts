import { ConnectError } from "@connectrpc/connect";
import { pino } from "pino";
import { afterEach } from "vitest";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { createDaemon, listenDaemon } from "#daemon/server.js";
import {
  storeOnStandIn,
  type WireAnswer,
  type WireStandIn,
} from "#daemon/store/mongo-wire-stand-in.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

export interface StandInDaemon {
  server: WireStandIn;
  /** The daemon's gRPC address. */
  daemonUrl: string;
  /** What the daemon logged at warn and above. */
  logs: Record<string, unknown>[];
  /** Stops the daemon, its store and the stand-in. */
  close(): Promise<void>;
}

/**
 * A daemon over the MongoDB adapter and a wire-protocol stand-in for the server
 * (mongo-wire-stand-in.ts) that answers as `database` does, on a free port, with
 * CONSENT_MONGODB_TIMEOUT_MS at `timeoutMs` (1 s by default).
 */
export async function startStandInDaemon(
  database: { answer: WireAnswer },
  options: { operatorToken: string; timeoutMs?: number },
): Promise<StandInDaemon> {
  const { store, server, close } = await storeOnStandIn(database, options.timeoutMs);
  const logs: Record<string, unknown>[] = [];
  const logger = pino({ level: "warn" }, { write: (line: string) => logs.push(JSON.parse(line)) });
  // The store and the stand-in are closed again when a later step fails.
  try {
    const daemon = createDaemon({
      store,
      operatorToken: options.operatorToken,
      identityKeys: [],
      baseUrl: "http://127.0.0.1:8080",
      logger,
    });
    const listening = await listenDaemon(daemon, { host: "127.0.0.1", port: 0, logger });
    return {
      server,
      daemonUrl: listening.url,
      logs,
      async close() {
        await listening.app.close();
        await close();
      },
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A daemon over a stand-in for each test that starts one (useStandInDaemon). */
export interface StandInDaemonPerTest {
  /** The call options that bear the daemon's operator token. */
  asOperator: { headers: { authorization: string } };
  /**
   * Starts this test's daemon over `database` (startStandInDaemon), with CONSENT_MONGODB_TIMEOUT_MS
   * at `timeoutMs` if given; it is closed after the test.
   */
  start(database: { answer: WireAnswer }, timeoutMs?: number): Promise<StandInDaemon>;
}

/** For a describe block: its tests' daemons over stand-ins, under one operator token. */
export function useStandInDaemon(): StandInDaemonPerTest {
  const operatorToken = generateOperatorToken();
  let running: StandInDaemon | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });
  return {
    asOperator: { headers: { authorization: `Bearer ${operatorToken}` } },
    async start(database, timeoutMs) {
      running = await startStandInDaemon(database, { operatorToken, timeoutMs });
      return running;
    },
  };
}

/** How a call failed, as a client reads it: its code, ErrorInfo code, message and Retry-After. */
export async function failureOf(call: Promise<unknown>) {
  return failureFrom(
    await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    ),
  );
}

/** What a client reads of an error (none: a call that succeeded), as failureOf tells it. */
export function failureFrom(error: ConnectError | undefined) {
  return {
    code: error?.code,
    errorCode: error?.findDetails(ErrorInfoSchema)[0]?.code,
    message: error?.rawMessage,
    retryAfter: error?.metadata.get("retry-after"),
  };
}
