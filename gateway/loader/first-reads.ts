import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Reads one gateway process has in flight at most for banners it holds no copy of (never served,
 * dropped for room, or last read past STALE_IF_ERROR_MS). Any 36-character id passes the loader's
 * route, and a read the daemon leaves unanswered (its store stalled) goes on past the visitor's
 * 503 until the daemon answers, up to the store's own timeout: without a bound, ids made up by
 * the thousand during a slow-store period would each hold a call. The gateway reaches the daemon
 * over one HTTP/2 connection, on which the daemon takes MAX_STREAMS_PER_CONNECTION (256) calls at
 * once and the connection holds back every call past those, REST ones and the re-reads of banners
 * held included, until one ends: these reads take half of them at most. A daemon that answers in
 * milliseconds serves thousands of first reads a second within it, a gateway's start included.
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

/**
 * Counts the reads in flight of banners with no copy to serve against `max` (MAX_FIRST_READS);
 * reads of banners held are not counted, so ids made up never starve a banner already served
 * (stale-if-error serves it meanwhile).
 */
export class FirstReads {
  #inFlight = 0;

  constructor(private readonly max: number) {}

  /** Starts `read`, counted until it settles; throws firstReadsAtBound at the bound, unstarted. */
  start<T>(read: () => Promise<T>): Promise<T> {
    if (this.#inFlight >= this.max) throw firstReadsAtBound(this.max);
    this.#inFlight += 1;
    const reading = read();
    const settled = () => {
      this.#inFlight -= 1;
    };
    reading.then(settled, settled);
    return reading;
  }
}
