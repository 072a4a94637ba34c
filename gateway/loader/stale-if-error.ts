import { unansweredRead } from "#gateway/daemon-failures.js";
import { isDaemonUnavailable } from "#gateway/errors.js";
import {
  type CachedBanner,
  type Loading,
  OVERDUE,
  overdueOf,
  type ReadToken,
} from "#gateway/loader/cached-banner.js";
import { FailedReads } from "#gateway/loader/failed-reads.js";
import {
  createStaleServingLog,
  type StaleServingLog,
  type StaleServingLogger,
} from "#gateway/loader/stale-log.js";

/**
 * Stale-if-error: a banner whose read fails because the daemon (or its store) cannot answer
 * (isDaemonUnavailable, errors.ts) is served as it was last read for up to a day after that read.
 * A daemon restarting in a rolling upgrade, or down for a night, then costs no site its banner
 * (without it no consent is asked and gated scripts never run). Beyond a day the gateway has been
 * cut off long enough that what it holds may no longer be what the operator wants shown, and it
 * answers 503 as for a banner it never served. An operator who deactivates or republishes a banner
 * meanwhile reaches visitors of this gateway once it reaches a daemon again: nothing it cannot
 * reach could tell it sooner.
 */
export const STALE_IF_ERROR_MS = 24 * 60 * 60_000;
/**
 * While a banner is served stale, the daemon is asked for it again at most this often (one read
 * in flight per banner; requests meanwhile are answered at once), so a daemon back from a restart
 * is read within seconds, and one that is struggling gets one call per banner every 5 s.
 */
export const STALE_RETRY_MS = 5_000;
/**
 * How long a request for a banner held in memory waits for its re-read before it is answered
 * from the held copy, marked stale, while the read goes on. A daemon that stopped answering (a
 * stalled process or store) fails a read only at the transport's ping timeout, about 15 s, and a
 * loader is a script in the site's `<head>`: past this bound the page is held for want of an
 * answer the gateway can already give. A daemon that answers takes milliseconds (tens with
 * MongoDB, a connection made included), so 2 s is far above any healthy read, and no request
 * is served the held copy for a merely slow one; it is also well under the wait a visitor notices
 * as a page that does not load. A banner with no copy to serve waits for its read after a
 * failure as long (failed-reads.ts), and for its first read FIRST_READ_WAIT_MS.
 */
export const HELD_READ_WAIT_MS = 2_000;
/**
 * How long a request for a banner with no copy to serve (never served, dropped for room, or last
 * read past STALE_IF_ERROR_MS) waits for its read, no failure of it before, until it is answered
 * 503 while the read goes on (failed-reads.ts): a stalled daemon would otherwise hold the site's
 * page until the transport's ping timeout, about 15 s. Longer than HELD_READ_WAIT_MS on purpose:
 * cut short, this read costs the visitor the banner itself, not a held copy, and no failure before
 * it says that the daemon is away, so a daemon that is merely slow (loaded, a burst of first reads
 * as a gateway starts, a connection to set up, a MongoDB command slowed) keeps 5 s, over a hundred
 * times a healthy read, to answer; a third of the ping timeout. A read that answers later is not
 * lost: its banner serves the requests after it.
 */
export const FIRST_READ_WAIT_MS = 5_000;

/**
 * What a loader cache (LoaderCacheOptions) may set of its stale-if-error; the bounds themselves are
 * STALE_IF_ERROR_MS, STALE_RETRY_MS, HELD_READ_WAIT_MS and FIRST_READ_WAIT_MS.
 */
export interface StaleServingSettings {
  /** How many banners whose read failed are remembered at most; default MAX_FAILED_READS. */
  maxFailedReads?: number;
  /** Told while banners are served stale and when the daemon answers again (stale-log.ts). */
  logger?: StaleServingLogger;
  /** How often it tells a lasting outage: REPEATED_FAILURE_LOG_MS unless a test shortens it. */
  repeatedFailureLogMs?: number;
}

export interface StaleServingOptions extends StaleServingSettings {
  now: () => number;
  /** How long a banner is served before the daemon is asked again (LoaderCacheOptions). */
  revalidateMs: number;
  /** Sets a banner's entry as the cache's most recent. */
  keep(publicId: string, entry: CachedBanner): void;
  /** Drops a banner from the cache. */
  drop(publicId: string): void;
}

/**
 * The loader cache's stale-if-error (loader-cache.ts): which banners it serves as last read while
 * the daemon cannot answer, for how long, and when it tells the operator. Kept apart from the
 * cache's own bookkeeping (entries, bytes, eviction), which it reaches through `keep` and `drop`.
 */
export class StaleServing {
  readonly #options: StaleServingOptions;
  readonly #staleLog: StaleServingLog | undefined;
  /** Banners kept whose last read failed or went unanswered: served as last read until re-read. */
  readonly #staleBanners = new Set<string>();
  /** Banners with no copy to serve whose last read failed for want of the daemon. */
  readonly #failedReads: FailedReads;

  constructor(options: StaleServingOptions) {
    this.#options = options;
    this.#staleLog =
      options.logger && createStaleServingLog(options.logger, options.repeatedFailureLogMs);
    this.#failedReads = new FailedReads({
      now: options.now,
      retryMs: STALE_RETRY_MS,
      heldReadWaitMs: HELD_READ_WAIT_MS,
      firstReadWaitMs: FIRST_READ_WAIT_MS,
      maxFailedReads: options.maxFailedReads,
    });
  }

  /**
   * Throws the failure of a banner with no copy to serve whose last read failed for want of the
   * daemon within STALE_RETRY_MS (failed-reads.ts): its request is answered without a call.
   */
  throwIfFailedRecently(publicId: string): void {
    const failed = this.#failedReads.recent(publicId);
    if (failed) throw failed.error;
  }

  /**
   * The Retry-After of a failure answered for a banner with no copy to serve: whole seconds until
   * its next read may be tried, or until the daemon's own Retry-After ends if later
   * (failed-reads.ts); undefined when its last read did not fail for want of the daemon.
   */
  retryAfterSeconds(publicId: string): number | undefined {
    return this.#failedReads.retryAfterSeconds(publicId);
  }

  /**
   * What a request for a banner being read gets: the read's answer for a banner never read or
   * past the bound; while the daemon cannot be reached, the banner as last read at once (the
   * retry's outcome serves the requests after it); else the read's answer, or the banner as held
   * once the read is overdue (heldAfterWait). A banner with no copy to serve waits for its read
   * at most FIRST_READ_WAIT_MS, or as long as a held one once a read of it failed for want of the
   * daemon, then gets the failure (failed-reads.ts).
   */
  whileRead(
    publicId: string,
    cached: CachedBanner | undefined,
    loading: Loading,
  ): CachedBanner | Promise<CachedBanner | null> {
    if (!this.holds(cached)) return this.#failedReads.whileRead(publicId, loading);
    if (cached.stale) return cached;
    return this.#heldAfterWait(publicId, cached, loading);
  }

  /**
   * A banner held, served as held, marked stale, without a read: MAX_HELD_READS re-reads of banners
   * held are in flight (reads-in-flight.ts), and `cause` says so in the stale-serving warning. The
   * entry is left as it is: its next request reads it once one of those reads has ended.
   */
  heldWithoutRead(publicId: string, cached: CachedBanner, cause: unknown): CachedBanner {
    this.#servedStaleFor(publicId, cause);
    return { ...cached, stale: true };
  }

  /**
   * A failed read's answer: the banner as last read while the daemon cannot be reached and that
   * read is within STALE_IF_ERROR_MS, kept to be read again after STALE_RETRY_MS (never past the
   * bound). Otherwise the failure, as without a banner read before: a banner past the bound is
   * forgotten, and one served stale until now is not served stale on any other failure. A
   * failure for want of the daemon without a copy to serve is answered again for STALE_RETRY_MS,
   * or as long as an overloaded daemon asked if shorter (failed-reads.ts).
   */
  afterFailedRead(
    publicId: string,
    previous: CachedBanner | undefined,
    token: ReadToken,
    error: unknown,
  ): CachedBanner {
    const current = !token.stale;
    if (!previous) {
      this.#failedReads.failed(publicId, error, token);
      throw error;
    }
    const now = this.#options.now();
    const until = previous.readAt + STALE_IF_ERROR_MS;
    if (now >= until) {
      if (current) this.#options.drop(publicId);
      this.#failedReads.failed(publicId, error, token);
      throw error;
    }
    if (!isDaemonUnavailable(error)) {
      if (current) previous.stale = false;
      throw error;
    }
    const entry: CachedBanner = {
      ...previous,
      checkedAt: Math.min(now + STALE_RETRY_MS, until) - this.#options.revalidateMs,
      stale: true,
    };
    if (current) {
      this.#options.keep(publicId, entry);
      this.#servedStaleFor(publicId, error);
    }
    return entry;
  }

  /** The daemon answered a read of a banner; `current` when the answer is kept. */
  answered(publicId: string, current: boolean): void {
    if (current) {
      this.#staleBanners.delete(publicId);
      this.#failedReads.forget(publicId);
    }
    this.#staleLog?.answered(this.#staleBanners.size);
  }

  /** The gateway has closed: its stale-serving lines held back are told now, none after. */
  closeLog(): void {
    this.#staleLog?.close();
  }

  /**
   * A banner is no longer served as last read: invalidated, dropped or evicted; invalidated, it is
   * read on its next request even if its last read failed.
   */
  forget(publicId: string): void {
    this.#staleBanners.delete(publicId);
    this.#failedReads.forget(publicId);
  }

  /**
   * Whether a banner has a copy to serve: its last successful read is recent enough to serve it
   * stale (stale-if-error).
   */
  holds(cached: CachedBanner | undefined): cached is CachedBanner {
    return cached !== undefined && this.#options.now() - cached.readAt < STALE_IF_ERROR_MS;
  }

  /**
   * The read's answer, or the banner as held, marked stale, once the read has been in flight for
   * HELD_READ_WAIT_MS (a daemon or store that stopped answering fails a read only at the
   * transport's ping timeout, about 15 s): the read goes on, and its outcome serves the requests
   * after it.
   */
  async #heldAfterWait(
    publicId: string,
    cached: CachedBanner,
    loading: Loading,
  ): Promise<CachedBanner | null> {
    const overdue = overdueOf(loading, HELD_READ_WAIT_MS, () => {
      if (!loading.token.stale && this.holds(cached))
        this.#servedStaleFor(publicId, unansweredRead(HELD_READ_WAIT_MS));
    });
    const first = await Promise.race([loading.promise, overdue]);
    if (first !== OVERDUE) return first;
    if (!this.holds(cached)) return loading.promise;
    return { ...cached, stale: true };
  }

  /** Counts a banner as served as last read for want of the daemon, and tells the operator. */
  #servedStaleFor(publicId: string, cause: unknown): void {
    this.#staleBanners.add(publicId);
    this.#staleLog?.servedStale(cause, this.#staleBanners.size);
  }
}
