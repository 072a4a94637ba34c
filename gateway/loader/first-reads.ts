import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Reads one gateway process has in flight at most for banners it holds no copy of (never served,
 * dropped for room, or last read past STALE_IF_ERROR_MS). Any 36-character id passes the loader's
 * route, and a read the daemon leaves unanswered (its store stalled) goes on past the visitor's
 * 503 until the daemon answers, up to the store's own timeout: without a bound, ids made up by
 * the thousand during a slow-store period would each hold a call. The gateway reaches the daemon
 * over one HTTP/2 connection, on which the daemon takes MAX_STREAMS_PER_CONNECTION (256) calls at
 * once and the connection holds back every call past those, REST ones included, until one ends:
 * these reads take half of them at most, the re-reads of banners held a quarter (MAX_HELD_READS,
 * held-reads.ts), so a quarter is left to the other calls. A daemon that answers in milliseconds
 * serves thousands of first reads a second within it, a gateway's start included. Reads of banners
 * held are not counted here, so ids made up never starve a banner already served.
 */
export const MAX_FIRST_READS = 128;

/**
 * The answer to a request for a banner held nowhere while MAX_FIRST_READS reads of such banners
 * are in flight: the daemon (or its store) has not answered them, and no call is sent. A 503 with
 * the Retry-After of an outage that passes by itself (errors.ts), logged with the other calls the
 * daemon left unanswered.
 */
export function firstReadsAtBound(max: number): ConnectError {
  return new ConnectError(
    `the daemon has not answered the ${max} banner reads in flight for banners not held, the most the gateway sends at once`,
    Code.Unavailable,
  );
}
