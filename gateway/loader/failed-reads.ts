import { retryAfterSeconds } from "#daemon/limits/rate-limiter.js";
import { unansweredRead } from "#gateway/daemon-failures.js";
import { daemonRetryAfterSeconds, isDaemonUnavailable } from "#gateway/errors.js";
import {
  type CachedBanner,
  type Loading,
  OVERDUE,
  overdueOf,
  type ReadToken,
  remember,
} from "#gateway/loader/cached-banner.js";

/**
 * Bound on the banners remembered as failed: a public id a visitor made up is read, and fails, as
 * any other while the daemon is away, so the map is capped, the least recently failed leaving
 * first (one then asks the daemon again on its next request, as before its failure).
 */
export const MAX_FAILED_READS = 10_000;

interface FailedRead {
  /** The read's failure, the answer to the banner's requests until `retryAt`. */
  error: unknown;
  /** When the daemon is asked for the banner again. */
  retryAt: number;
  /** Until when its 503 asks clients to wait: `retryAt`, or later if the daemon asked for it. */
  retryAfterAt: number;
}

export interface FailedReadsOptions {
  now: () => number;
  /**
   * How long a failure is answered before the daemon is asked again (STALE_RETRY_MS); a refusal
   * of a daemon that asked for less (daemonRetryAfterSeconds) only as long as it asked.
   */
  retryMs: number;
  /** How long a request waits for that next read before it gets the failure (HELD_READ_WAIT_MS). */
  heldReadWaitMs: number;
  /** How long a request waits for a read with no failure before it (FIRST_READ_WAIT_MS). */
  firstReadWaitMs: number;
  /** How many banners are remembered at most; default MAX_FAILED_READS. */
  maxFailedReads?: number;
}

/**
 * Banners with no copy to serve (never served, dropped for room, or last read past
 * STALE_IF_ERROR_MS) whose last read failed because the daemon (or its store) cannot answer
 * (isDaemonUnavailable), or went unanswered past its bound: for `retryMs` their requests get that
 * failure again at once, without a call, with a Retry-After of the seconds left until the next
 * read may be tried (or until the end of the daemon's own Retry-After, if later); then one read
 * asks again. A daemon that refused the read at once asking for a retry sooner (overloaded:
 * over its request budget, its store too busy; daemonRetryAfterSeconds) is asked again as soon
 * as it asked, not `retryMs` on: a blip of a second would otherwise cost every visitor of the
 * banner's sites the banner for 5 s. A stalled daemon fails a read only at the
 * transport's ping timeout, about 15 s, so no request waits that long: a request waits for a
 * banner's first read at most `firstReadWaitMs`, and for the read after a failure at most
 * `heldReadWaitMs`; past it the read counts as failed (answered as above for `retryMs`) while it
 * goes on, and its answer, if the daemon gives one, serves the requests after it. One call per
 * banner every `retryMs` at most, as for a banner served stale, and no request piles up behind a
 * daemon that stopped answering. An answer of the daemon (a banner, or none) ends it; a banner
 * unknown or inactive is remembered as such by the cache alone, as before.
 */
export class FailedReads {
  readonly #failed = new Map<string, FailedRead>();

  constructor(private readonly options: FailedReadsOptions) {}

  /** The failure a request for the banner gets at once: its last read failed within `retryMs`. */
  recent(publicId: string): { error: unknown } | undefined {
    const failed = this.#failed.get(publicId);
    return failed && this.options.now() < failed.retryAt ? failed : undefined;
  }

  /**
   * Whole seconds until the banner's next read may be tried, or until the end of the Retry-After
   * the daemon answered the failure with if later, at least 1 (a read still in flight past its
   * window may answer at any time); undefined unless its last read failed for want of the daemon:
   * the Retry-After of the failure a request gets, counting down from the failure on.
   */
  retryAfterSeconds(publicId: string): number | undefined {
    const failed = this.#failed.get(publicId);
    return failed && retryAfterSeconds(failed.retryAfterAt, this.options.now());
  }

  /**
   * What a request for a banner with no copy to serve gets while it is read: the read's answer,
   * or, once the read has been in flight `firstReadWaitMs` (`heldReadWaitMs` after a failure), a
   * failure remembered as the read's own would be.
   */
  async whileRead(publicId: string, loading: Loading): Promise<CachedBanner | null> {
    const waitMs = this.#failed.has(publicId)
      ? this.options.heldReadWaitMs
      : this.options.firstReadWaitMs;
    const overdue = overdueOf(loading, waitMs, () =>
      this.failed(publicId, unansweredRead(waitMs), loading.token),
    );
    const first = await Promise.race([loading.promise, overdue]);
    if (first !== OVERDUE) return first;
    // Remembered when the bound passed, unless the banner changed (invalidate) or left the map.
    throw this.#failed.get(publicId)?.error ?? unansweredRead(waitMs);
  }

  /**
   * A read of a banner with no copy to serve failed; remembered unless the banner changed
   * meanwhile (`token.stale`).
   */
  failed(publicId: string, error: unknown, token: ReadToken): void {
    if (token.stale) return;
    if (!isDaemonUnavailable(error)) {
      this.#failed.delete(publicId);
      return;
    }
    const now = this.options.now();
    const askedMs = (daemonRetryAfterSeconds(error) ?? 0) * 1_000;
    // A refusal that came only after the read's bound passed is a stalled daemon's or store's,
    // whatever it asks: the next read comes `retryMs` on, as for a daemon out of reach.
    const refusedAtOnce = askedMs > 0 && !token.overdue;
    const retryAt =
      now + (refusedAtOnce ? Math.min(askedMs, this.options.retryMs) : this.options.retryMs);
    remember(
      this.#failed,
      publicId,
      { error, retryAt, retryAfterAt: Math.max(retryAt, now + askedMs) },
      this.options.maxFailedReads ?? MAX_FAILED_READS,
    );
  }

  /** The daemon answered for the banner, or it changed (invalidate): it is read as asked for. */
  forget(publicId: string): void {
    this.#failed.delete(publicId);
  }
}
