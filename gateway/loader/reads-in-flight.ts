import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Reads one gateway process has in flight at most for banners it holds no copy of (never served,
 * dropped for room, or last read past STALE_IF_ERROR_MS). Any 36-character id passes the loader's
 * route, and a read the daemon leaves unanswered (its store stalled) goes on past the visitor's
 * 503 until the daemon answers, up to the store's own timeout: without a bound, ids made up by
 * the thousand during a slow-store period would each hold a call. The gateway reaches the daemon
 * over one HTTP/2 connection, on which the daemon takes MAX_STREAMS_PER_CONNECTION (256) calls at
 * once and the connection holds back every call past those, REST ones included, until one ends:
 * these reads take half of them at most, the re-reads of banners held a quarter (MAX_HELD_READS),
 * so a quarter is left to the other calls. A daemon that answers in milliseconds serves thousands
 * of first reads a second within it, a gateway's start included. Reads of banners held are not
 * counted here, so ids made up never starve a banner already served.
 */
export const MAX_FIRST_READS = 128;

/**
 * Re-reads one gateway process has in flight at most for banners it holds (served within
 * STALE_IF_ERROR_MS): each is read again every `revalidateMs` (30 s), after an edit or publish,
 * and every STALE_RETRY_MS while served stale, and a read the daemon leaves unanswered goes on
 * long after its requests were answered from the held copy. A quarter of the daemon's streams on
 * the gateway's connection (MAX_FIRST_READS). Past the bound a held banner is served as held,
 * marked stale, without a read (stale-if-error.ts): its next request once a read ends reads it
 * again.
 */
export const MAX_HELD_READS = 64;

/** What a kind of read is, in the words of the failure at its bound. */
const READS = {
  first: "banner reads in flight for banners not held",
  held: "re-reads in flight of banners held",
} as const;

/**
 * Why a read of `kind` was not sent: `max` such reads are in flight, the daemon (or its store) has
 * not answered them. For a first read the request's 503, with the Retry-After of an outage that
 * passes by itself (errors.ts), logged with the other calls the daemon left unanswered; for a
 * re-read the cause of the stale-serving warning (stale-log.ts), no request failing for it.
 */
export function readsAtBound(kind: keyof typeof READS, max: number): ConnectError {
  return new ConnectError(
    `the daemon has not answered the ${max} ${READS[kind]}, the most the gateway sends at once`,
    Code.Unavailable,
  );
}

/**
 * Counts a loader cache's reads of one kind in flight against `max`: a read counts from its start
 * until it settles, however long after its requests were answered.
 */
export class ReadsInFlight {
  #inFlight = 0;

  constructor(readonly max: number) {}

  /** Starts `read`, counted until it settles; undefined at the bound, `read` not started. */
  start<T>(read: () => Promise<T>): Promise<T> | undefined {
    if (this.#inFlight >= this.max) return undefined;
    this.#inFlight += 1;
    const reading = read();
    const settled = () => {
      this.#inFlight -= 1;
    };
    reading.then(settled, settled);
    return reading;
  }
}
