/** CONSENT_MONGODB_TIMEOUT_MS when unset. */
export const DEFAULT_MONGODB_TIMEOUT_MS = 10_000;

/** The most a request waits for a primary to be found, whatever the setting. */
const MAX_SELECTION_MS = 5_000;
/**
 * How much longer than the server's own limits a command's reply is waited for, at most: a
 * server that gives up on a write's majority or a query's run time says so before the connection
 * is given up on (and kept, instead of closed and opened again).
 */
const MAX_REPLY_MARGIN_MS = 5_000;

/**
 * The bounds of each wait of a command on MongoDB, from one setting, CONSENT_MONGODB_TIMEOUT_MS.
 *
 * The driver's single per-operation bound (`timeoutMS`, client-side operation timeout) is not
 * used: it does nothing in the driver this service runs (7.8 and later deprecate it as a no-op),
 * and in 7.0 to 7.7 an operation it cut short could leave a pooled connection out of step with
 * the server, so that the next command read another one's reply. Each stage has its own bound
 * instead, which is what the driver recommends. A bound that passes fails the command with a
 * driver error that `isMongoUnavailable` takes for unavailable: 503, Retry-After (spec 7). The one
 * exception is a consent log read of a time range that the server stopped at `serverMs`: it
 * passes over more rows than the server reads in that time, and would again, so its caller is
 * told to narrow it (LogReadTooLargeError) instead.
 */
export interface MongoTimeouts {
  /** Finding the primary (serverSelectionTimeoutMS): the setting, at most 5 s. */
  selectionMs: number;
  /**
   * Waiting for a pooled connection (waitQueueTimeoutMS), opening a new one included: the
   * setting. Every pooled connection busy means a server that answers slowly or not at all.
   */
  checkoutMs: number;
  /**
   * The server's own time: a write's wait for its majority (wtimeoutMS), and a consent log read's
   * run (maxTimeMS), after which the server stops and answers with an error. No read may be given
   * longer: `replyMs`, the client's bound of every reply, would close its connection first.
   */
  serverMs: number;
  /**
   * Silence on a connection while a command is in flight (socketTimeoutMS): the setting plus as
   * much again, at most 5 s. A server that takes longer has stopped answering (a network
   * partition, a stalled primary): the connection is closed and the command fails.
   */
  replyMs: number;
  /**
   * The longest one command can take: the driver retries a read or a single-document write once
   * when it fails for want of a server (retryReads, retryWrites), each attempt finding a primary,
   * a connection and a reply. An overloaded server's refusal is not retried
   * (maxAdaptiveRetries 0): it answers 503 at once, as every other refusal for now does.
   */
  commandMs: number;
}

export function mongoTimeouts(timeoutMs = DEFAULT_MONGODB_TIMEOUT_MS): MongoTimeouts {
  const selectionMs = Math.min(timeoutMs, MAX_SELECTION_MS);
  const replyMs = timeoutMs + Math.min(timeoutMs, MAX_REPLY_MARGIN_MS);
  return {
    selectionMs,
    checkoutMs: timeoutMs,
    serverMs: timeoutMs,
    replyMs,
    commandMs: 2 * (selectionMs + timeoutMs + replyMs),
  };
}
