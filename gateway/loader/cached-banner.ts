import { startBound } from "#gateway/bound-timer.js";
import type { LoaderVariant } from "#gateway/loader/loader-response.js";
import type { PublishedBanner } from "#gen/consent/v1/banner_pb.js";

/** One location's response as kept: being built, then built, with the bytes it counts for. */
export interface KeptVariant {
  /** Numbers the build within its cache: a queued recompression names it (brotli-upgrades.ts). */
  build: number;
  response: Promise<LoaderVariant>;
  /** The response once built. */
  built?: LoaderVariant;
  /** Its three bodies once built (0 until then), the recompressed brotli one once replaced. */
  bytes: number;
}

/**
 * A banner's responses by location, least recently served first, with the bytes of those built
 * (the sum of their `bytes`).
 */
export interface Variants {
  bodies: Map<string, KeptVariant>;
  bytes: number;
}

/**
 * A banner as the loader cache (loader-cache.ts) holds it, and as stale-if-error
 * (stale-if-error.ts) serves it while the daemon cannot be reached: one shape for both, as each
 * hands the other entries.
 */
export interface CachedBanner {
  banner: PublishedBanner;
  fingerprint: string;
  /**
   * When the daemon last confirmed the entry: it is served without asking until `revalidateMs`
   * after. While stale, set so that this ends at the next retry.
   */
  checkedAt: number;
  /** When the daemon last answered with this banner: the stale-if-error bound counts from it. */
  readAt: number;
  /**
   * The last read failed for want of the daemon: served as it was, read again every
   * STALE_RETRY_MS.
   */
  stale: boolean;
  /** Shared by the entries of one banner whose production side is unchanged. */
  variants: Variants;
}

/** What is known of a read of a banner in flight beyond its outcome. */
export interface ReadToken {
  /** Its answer may predate a change (invalidate): it answers, but is not kept. */
  stale: boolean;
  /**
   * It went unanswered past its bound (overdueOf): a failure it ends with came late, from a daemon
   * or store that was stalled, not refused at once (failed-reads.ts).
   */
  overdue?: boolean;
}

/** Resolves a read's `overdue` wait. */
export const OVERDUE = Symbol("overdue");

/** A read of a banner from the daemon in flight; `stale` once the banner changed meanwhile. */
export interface Loading {
  token: ReadToken;
  promise: Promise<CachedBanner | null>;
  /**
   * Resolves once the read has been in flight for its bound (overdueOf, set by the first request
   * that waits for it: HELD_READ_WAIT_MS for a banner held in memory or one whose last read
   * failed, FIRST_READ_WAIT_MS for a banner with no copy to serve read first): from then on its
   * requests are answered without it (the held copy, or the failure).
   */
  overdue?: Promise<typeof OVERDUE>;
}

/**
 * A read's `overdue`, made by the first request to ask for it: resolves once the read has been in
 * flight `waitMs`, after marking its token overdue and `onOverdue`; never, once the read settled
 * first. An answer that reached
 * the gateway while its event loop was held past the bound counts as in time (startBound): the
 * daemon answered within it, and the request gets that answer, not the held copy or a 503.
 */
export function overdueOf(
  loading: Loading,
  waitMs: number,
  onOverdue: () => void,
): Promise<typeof OVERDUE> {
  if (!loading.overdue) {
    let cancel: (() => void) | undefined;
    loading.overdue = new Promise((resolve) => {
      cancel = startBound(waitMs, () => {
        loading.token.overdue = true;
        onOverdue();
        resolve(OVERDUE);
      });
    });
    const stop = () => cancel?.();
    loading.promise.then(stop, stop);
  }
  return loading.overdue;
}

/** Sets a map's entry as its most recent, dropping the least recent beyond `max` (returned). */
export function remember<V>(
  map: Map<string, V>,
  key: string,
  value: V,
  max: number,
): { key: string; value: V } | undefined {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    const oldest = map.entries().next().value;
    if (oldest === undefined) return undefined;
    map.delete(oldest[0]);
    return { key: oldest[0], value: oldest[1] };
  }
  return undefined;
}
