import type { LoaderVariant } from "#gateway/loader/loader-response.js";
import type { PublishedBanner } from "#gen/consent/v1/banner_pb.js";

/** A banner's responses by location, with the bytes of those built (all three bodies). */
export interface Variants {
  bodies: Map<string, Promise<LoaderVariant>>;
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
  /** The last read failed for want of the daemon: served as it was, read again every `retryMs`. */
  stale: boolean;
  /** Shared by the entries of one banner whose production side is unchanged. */
  variants: Variants;
}

/** Marks a read whose answer may predate a change (invalidate): it answers, but is not kept. */
export interface ReadToken {
  stale: boolean;
}

/** Resolves a read's `overdue` wait. */
export const OVERDUE = Symbol("overdue");

/** A read of a banner from the daemon in flight; `stale` once the banner changed meanwhile. */
export interface Loading {
  token: ReadToken;
  promise: Promise<CachedBanner | null>;
  /**
   * Resolves once the read has been in flight for `heldReadWaitMs` (set by the first request for
   * a banner held in memory): from then on such requests are answered from the held copy.
   */
  overdue?: Promise<typeof OVERDUE>;
}
