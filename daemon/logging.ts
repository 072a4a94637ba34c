import { type DestinationStream, type Logger, pino, stdSerializers } from "pino";
import { messageOf } from "#daemon/errors.js";

/**
 * A preferences link's path (decisions §5), `/preferences/{token}`, with each letter of its name
 * also percent-encoded or in another case: the token is a capability (whoever holds it may change
 * a visitor's choices while it lasts), so no log line may hold one.
 */
const PREFERENCES_LINK = new RegExp(
  `/${[..."preferences"].map((letter) => `(?:${letter}|${percentEncodings(letter)})`).join("")}/[^/?#\\s"\\\\]+`,
  "gi",
);

/**
 * A letter percent-encoded as either case of it (`p`: `%70|%50`); the pattern's `i` flag takes
 * the hex digits in either case.
 */
function percentEncodings(letter: string): string {
  return [letter.toLowerCase(), letter.toUpperCase()]
    .map((form) => `%${form.charCodeAt(0).toString(16)}`)
    .join("|");
}

/** A log line (pino's JSON) with every preferences link's token written `[redacted]`. */
export function withoutPreferencesTokens(line: string): string {
  return line.replace(
    PREFERENCES_LINK,
    (link) => `${link.slice(0, link.lastIndexOf("/"))}/[redacted]`,
  );
}

/**
 * An error in a log line, as pino writes it, with its `type` taken from the name the error gives
 * itself (the service's errors set theirs, as connect-es' and the MongoDB driver's do) rather than
 * from its class: the service's bundle does not keep the names classes were written with
 * (bin/run-ts.js, loadService), so a class the bundle renamed would read `MongoServerError5`.
 * An error that names itself no more than `Error` keeps its class's name.
 */
function errorInLog(error: Error) {
  const logged = stdSerializers.err(error);
  if (error instanceof Error && error.name !== "Error") logged.type = error.name;
  return logged;
}

/**
 * A request in a log line: its method and URL, never its client's address, port or headers
 * (README, "Logs"). In place of Fastify's own serializer, which adds the address and port.
 */
function requestInLog(request: { method?: string; url?: string }) {
  return { method: request.method, url: request.url };
}

/**
 * The JSON loggers of the programs' two services, each line tagged with the service that wrote
 * it: `consentd` or `consent-gateway`. Both are children of one logger, so when `npm start` runs
 * both in one process their lines go out through one writer and never interleave. Every line,
 * Fastify's and connect-es' included, passes one redaction on its way out: a preferences link
 * (in a message, an error's message or stack, or a request) loses its token.
 *
 * Two writers pass around this redaction, and neither can carry a token or another secret, so
 * neither is routed through it:
 * - connect-fastify's own `console.error` (stderr) when a response cannot be written: it names
 *   the procedure and prints Node's stream error (a reset, a destroyed stream), never a message.
 *   A handler's failure never gets there: connect-es turns it into the call's status (the
 *   interceptor above logs it here). The daemon's paths are procedure names; a preferences
 *   link only travels inside messages (a log post's answer, a webhook event).
 * - Node's print of an uncaught exception, which bin/run-ts.js rethrows. A link's token comes in
 *   as the gateway's request URL, and keys and tokens as headers, read only by route handlers
 *   and hooks inside Fastify's promise chain (a failure goes to its error handler, logged here)
 *   or by RPC handlers (their failures become the call's status, above); no timer or listener
 *   outside those holds one, and a start-up failure is worded by config.ts without secrets.
 * A change that lets either hold one (a listener reading request URLs, a handler outside those
 * chains) routes it here.
 */
export function serviceLoggers(
  level: string,
  destination: DestinationStream = process.stdout,
): { daemon: Logger; gateway: Logger } {
  // Through process.stdout, whose write errors are events the programs handle (bin/run-ts.js:
  // a reader gone, a terminal hung up), rather than pino's own writer on fd 1, which throws them
  // and, at exit, retries a failed flush for ever (a closed terminal's EIO hung the drain).
  // Writes to files, pipes and terminals are synchronous on Linux, so no line waits in a buffer.
  const root = pino(
    {
      level,
      base: null,
      // In place of pino's and Fastify's own; Fastify's child loggers keep them.
      serializers: { req: requestInLog, err: errorInLog },
      hooks: { streamWrite: withoutPreferencesTokens },
    },
    destination,
  );
  return {
    daemon: root.child({ service: "consentd" }),
    gateway: root.child({ service: "consent-gateway" }),
  };
}

/** What the daemon's error reporting needs of a logger (pino's, or a test's). */
export interface ErrorLogger {
  error(details: object, message: string): void;
  warn(details: object, message: string): void;
}

/** How often a failure that lasts is logged: its first occurrence, then one line per this long. */
export const REPEATED_FAILURE_LOG_MS = 10_000;

/**
 * Logs a failure that repeats while a state lasts (a store out of reach during a MongoDB
 * election, a damaged store, a background pass failing each second) at most once per
 * REPEATED_FAILURE_LOG_MS, each line counting the failures since the one before, so the state
 * is visible without a line (and a stack) per failed call. With `byWords`, a failure with other
 * words than the last one logged is logged at once, so a new fault never hides behind an old one
 * (for failures of any cause, such as a background pass's); without, every failure counts as the
 * state's (an outage's or a damaged store's words vary from call to call). With `fieldsOf`, the
 * line names the failure in the fields it gives of it (an outage's own account,
 * StoreUnavailability.cause, as `storeError`), instead of the error with its stack as `err`.
 */
export function repeatedFailureLog<Failure = unknown>(
  logger: ErrorLogger,
  message: string,
  {
    level = "warn",
    byWords = false,
    fieldsOf,
  }: {
    level?: keyof ErrorLogger;
    byWords?: boolean;
    fieldsOf?: (failure: Failure) => object;
  } = {},
): (error: Failure, details?: object) => void {
  let loggedAt = Number.NEGATIVE_INFINITY;
  let loggedWords: string | undefined;
  let unlogged = 0;
  return (error, details) => {
    const now = performance.now();
    const words = byWords ? messageOf(error) : undefined;
    if (now - loggedAt < REPEATED_FAILURE_LOG_MS && words === loggedWords) {
      unlogged += 1;
      return;
    }
    loggedWords = words;
    // fieldsOf: the failure without a stack, for an expected condition rather than a bug to trace.
    const cause = fieldsOf ? fieldsOf(error) : { err: error };
    logger[level]({ ...cause, ...details, failedSincePreviousLine: unlogged }, message);
    loggedAt = now;
    unlogged = 0;
  };
}
