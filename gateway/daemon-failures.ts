import { Code, ConnectError } from "@connectrpc/connect";

/**
 * A stream the daemon refused before processing it (REFUSED_STREAM, or past a GOAWAY): the
 * connection sends the call once more, and only a second refusal reaches the caller (unreachable).
 */
export class Refused extends Error {}

/** Every call failed once the gateway's shutdown gave them up (abandonCalls). */
export function shuttingDown(): ConnectError {
  return new ConnectError("the gateway is shutting down", Code.Unavailable);
}

/** The daemon's answer passed the transport's readMaxBytes: the gateway's failure, not the caller's. */
export function tooLarge(readMaxBytes: number): ConnectError {
  return new ConnectError(
    `the daemon's answer is larger than readMaxBytes ${readMaxBytes}`,
    Code.Internal,
  );
}

/** The daemon went away before answering in full (reset, connection lost, shut down). */
export function lost(): ConnectError {
  return new ConnectError("the daemon closed the call without answering it", Code.Unavailable);
}

/** Calls the daemon refused unread, as over its request budget: retried shortly, they may pass. */
const busyFailures = new WeakSet<ConnectError>();

/** The daemon reset the call with ENHANCE_YOUR_CALM: see isDaemonBusy. */
export function busy(): ConnectError {
  const error = new ConnectError(
    "the daemon holds as many requests as it allows",
    Code.Unavailable,
  );
  busyFailures.add(error);
  return error;
}

/**
 * Whether the daemon reset a call with ENHANCE_YOUR_CALM (over its request budget while the
 * request was still arriving, or a new stream its session would not take), so before carrying it
 * out: the gateway's answer asks for a retry (`Retry-After`), as its own body budget's does.
 * Node resets with the same code when this side's session passes its bound, after the daemon
 * answered; SESSION_MEMORY_MB (daemon-link.ts) keeps that bound above what the body budget lets
 * queue.
 */
export function isDaemonBusy(error: unknown): boolean {
  return error instanceof ConnectError && busyFailures.has(error);
}

/**
 * A banner read the loader stopped waiting for at its bound (stale-if-error.ts, failed-reads.ts)
 * while it goes on: the daemon, or its store, has not answered it. Said so, not as the daemon out
 * of reach: in one process (`npm start`) the daemon is always reached, and what is slow is its
 * store. Warned of with the failures to reach the daemon, as an outage both (unreachable-log.ts).
 */
export function unansweredRead(waitedMs: number): ConnectError {
  return new ConnectError(
    `the daemon has not answered a banner read within ${waitedMs} ms`,
    Code.Unavailable,
  );
}

/**
 * A failure below the protocol: the daemon could not be reached or went away. The message names
 * the first failure (Node's stream errors repeat their cause in their own message, and a logger
 * would print the chain again); every address tried when there were several.
 */
export function unreachable(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  return new ConnectError(
    `the daemon could not be reached: ${firstFailure(error)}`,
    Code.Unavailable,
  );
}

/** The text of the failure that started `error`'s chain (exported for its tests). */
export function firstFailure(error: unknown): string {
  let root = error;
  const seen = new Set<unknown>();
  while (root instanceof Error && root.cause !== undefined && !seen.has(root)) {
    seen.add(root);
    root = root.cause;
  }
  const messageOf = (value: unknown) =>
    value instanceof Error
      ? value.message || String((value as { code?: unknown }).code ?? value.name)
      : String(value);
  // Several addresses refused (a host name with IPv4 and IPv6 addresses): Node's AggregateError
  // has an empty message and one error per address.
  if (root instanceof AggregateError && root.errors.length > 0) {
    return root.errors.map(messageOf).join("; ");
  }
  return messageOf(root) || messageOf(error);
}
