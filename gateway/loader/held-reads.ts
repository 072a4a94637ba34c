import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Re-reads one gateway process has in flight at most for banners it holds (served within
 * STALE_IF_ERROR_MS): each is read again every `revalidateMs` (30 s), after an edit or publish,
 * and every STALE_RETRY_MS while served stale, and a read the daemon leaves unanswered (its store
 * stalled) goes on long after its requests were answered from the held copy, up to the store's
 * own timeout. With thousands of banners held, such reads would otherwise pile up past the
 * daemon's MAX_STREAMS_PER_CONNECTION (256) calls at once on the gateway's one HTTP/2 connection,
 * which then holds back every other call, REST ones included. A quarter of those streams: with
 * MAX_FIRST_READS (half, first-reads.ts) a quarter is left to the other calls. Past the bound a
 * held banner is served as held, marked stale, without a read (stale-if-error.ts): its next
 * request once a read ends reads it again.
 */
export const MAX_HELD_READS = 64;

/**
 * Why a held banner was served as held without a read: MAX_HELD_READS re-reads are in flight,
 * the daemon (or its store) has not answered them. The cause of the stale-serving warning
 * (stale-log.ts); no request fails for it.
 */
export function heldReadsAtBound(max: number): ConnectError {
  return new ConnectError(
    `the daemon has not answered the ${max} re-reads in flight of banners held, the most the gateway sends at once`,
    Code.Unavailable,
  );
}
