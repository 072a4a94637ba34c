import { toBinary } from "@bufbuild/protobuf";
import { DEFAULT_LOADER_CACHE_MB } from "#daemon/config.js";
import {
  type BrotliUpgrade,
  BrotliUpgrades,
  belowTopQuality,
} from "#gateway/loader/brotli-upgrades.js";
import {
  type CachedBanner,
  type KeptVariant,
  type Loading,
  type ReadToken,
  remember,
  type Variants,
} from "#gateway/loader/cached-banner.js";
import { buildVariant, type LoaderVariant, sha256 } from "#gateway/loader/loader-response.js";
import {
  MAX_FIRST_READS,
  MAX_HELD_READS,
  ReadsInFlight,
  readsAtBound,
} from "#gateway/loader/reads-in-flight.js";
import { type Geo, variantGeo, variantKey } from "#gateway/loader/runtime-config.js";
import { StaleServing, type StaleServingSettings } from "#gateway/loader/stale-if-error.js";
import { type PublishedBanner, PublishedBannerSchema } from "#gen/consent/v1/banner_pb.js";

export interface LoaderCacheOptions extends StaleServingSettings {
  /**
   * The active banner's production side, or null when the banner is unknown or inactive. Rejects
   * with a ConnectError `unavailable` or `deadline_exceeded` when the daemon or its store cannot
   * answer (isDaemonUnavailable); anything else fails the request as for a banner never read.
   */
  fetchBanner(publicId: string): Promise<PublishedBanner | null>;
  /** How long a banner is served before the daemon is asked again (other gateways' publishes). */
  revalidateMs: number;
  now?: () => number;
  /** Bound on the bytes of the responses kept, over all banners (CONSENT_LOADER_CACHE_MB's default). */
  maxBytes?: number;
  /** Reads in flight at most of banners with no copy to serve; default MAX_FIRST_READS. */
  maxFirstReads?: number;
  /** Re-reads in flight at most of banners held; default MAX_HELD_READS. */
  maxHeldReads?: number;
}

/**
 * Bounds on memory: banners kept, locations kept per banner (the least recently served leaves
 * first), and public ids known to be missing.
 * The bytes kept have a bound of their own (`maxBytes`), as a response per country or region of a
 * banner with jurisdiction rules and large texts could otherwise reach gigabytes within the counts.
 */
const MAX_BANNERS = 5_000;
const MAX_VARIANTS = 300;
const MAX_MISSING = 10_000;

/**
 * Loader responses served from memory (decisions §6). A banner is re-checked against the daemon on
 * its next request once this process learns of a change (invalidate, wired to the daemon's publish
 * hook in single-process mode and to the banner routes a stand-alone gateway relays), and otherwise
 * after `revalidateMs`, which is how a publish through another gateway or daemon reaches this one;
 * a banner whose production side is unchanged keeps its compressed bodies. Concurrent requests for
 * one banner share one daemon call. An unknown or inactive banner is remembered as such for as long
 * (a site whose banner was switched off keeps embedding its loader), in a map of its own, so ids
 * that do not exist never push a live banner's bodies out of memory. Beyond `maxBytes`, the least
 * recently used banners are dropped, never the one just served. A read the daemon cannot answer
 * leaves a banner served as last read (stale-if-error, STALE_IF_ERROR_MS), read again every
 * STALE_RETRY_MS in the background; a banner with no copy to serve is answered that failure for
 * STALE_RETRY_MS (an overloaded daemon's refusal only as long as it asked, if shorter), then read
 * again, each request waiting for that read at most HELD_READ_WAIT_MS (failed-reads.ts); it waits
 * for its first such read at most FIRST_READ_WAIT_MS, past which the read counts as failed while it
 * goes on. Reads of banners with no copy to serve are in flight MAX_FIRST_READS at most
 * (reads-in-flight.ts): past it, a request that would start one is answered 503 at once, without a
 * call. Re-reads of banners held are in flight MAX_HELD_READS at most: past it, a request that
 * would start one is served the held copy at once, marked stale, without a call.
 */
export class LoaderCache {
  readonly #banners = new Map<string, CachedBanner>();
  /** Public ids the daemon answered "none" for, with when it did. */
  readonly #missing = new Map<string, number>();
  readonly #loading = new Map<string, Loading>();
  readonly #now: () => number;
  readonly #maxBytes: number;
  readonly #stale: StaleServing;
  readonly #upgrades: BrotliUpgrades;
  readonly #firstReads: ReadsInFlight;
  readonly #heldReads: ReadsInFlight;
  /** Bytes of the responses built for the banners in #banners. */
  #keptBytes = 0;
  /** Builds made so far: each response's `build`. */
  #builds = 0;

  constructor(private readonly options: LoaderCacheOptions) {
    this.#now = options.now ?? Date.now;
    this.#maxBytes = options.maxBytes ?? DEFAULT_LOADER_CACHE_MB * 1024 * 1024;
    this.#stale = new StaleServing({
      ...options,
      now: this.#now,
      keep: (publicId, entry) => this.#keep(publicId, entry),
      drop: (publicId) => this.#drop(publicId),
    });
    this.#upgrades = new BrotliUpgrades(options.logger);
    this.#firstReads = new ReadsInFlight(options.maxFirstReads ?? MAX_FIRST_READS);
    this.#heldReads = new ReadsInFlight(options.maxHeldReads ?? MAX_HELD_READS);
  }

  /** Bytes of the responses kept in memory (identity, brotli and gzip bodies). */
  get keptBytes(): number {
    return this.#keptBytes;
  }

  /**
   * The response for a visitor at `geo`, or null for an unknown or inactive banner; `stale` when
   * the daemon could not be reached to confirm it, or MAX_HELD_READS re-reads are in flight.
   * Rejects when the daemon cannot be reached and the banner was never read, or not within
   * STALE_IF_ERROR_MS (at once, within STALE_RETRY_MS of such a failure, or of an overloaded
   * daemon's Retry-After if shorter, or while MAX_FIRST_READS reads of such banners are in flight;
   * after FIRST_READ_WAIT_MS at most when the daemon does not answer).
   */
  async variant(publicId: string, geo: Geo | null): Promise<LoaderVariant | null> {
    const cached = await this.#banner(publicId);
    if (!cached) return null;
    const location = variantGeo(cached.banner, geo);
    const key = variantKey(location);
    const { variants } = cached;
    const kept = variants.bodies.get(key);
    // Re-inserted on use: the least recently served location leaves first.
    const variant = kept ?? this.#build(publicId, cached, location, key);
    this.#keepLocation(publicId, variants, key, variant);
    const built = await variant.response;
    // Asked for again while kept: worth recompressing at brotli's highest quality, unless it was
    // (every later request of a location served often, with nothing to make for it).
    if (kept && belowTopQuality(built)) {
      this.#upgrades.request(this.#upgradeOf(publicId, key, kept.build));
    }
    // A copy marked stale, so the bodies kept for the banner stay as built.
    return cached.stale ? { ...built, stale: true } : built;
  }

  /**
   * The Retry-After of the failure `variant` rejected with for a banner with no copy to serve:
   * whole seconds until the daemon is asked for it again, or until its own Retry-After ends if
   * later, counting down (failed-reads.ts); undefined for a failure not remembered (not for want
   * of the daemon).
   */
  retryAfterSeconds(publicId: string): number | undefined {
    return this.#stale.retryAfterSeconds(publicId);
  }

  /**
   * Stops the background recompressions for good (brotli-upgrades.ts): a closing gateway starts
   * none and drops those queued. Responses are still served, as built.
   */
  close(): void {
    this.#upgrades.stop();
  }

  /**
   * The gateway has closed, every request answered: the stale-serving lines held back are told
   * now rather than by a timer that outlives it, and none after (stale-log.ts).
   */
  closeLog(): void {
    this.#stale.closeLog();
  }

  /**
   * Marks a banner for a new read on its next request, and any answer for it still in flight as
   * stale (it may predate the change).
   */
  invalidate(publicId: string): void {
    const cached = this.#banners.get(publicId);
    if (cached) {
      cached.checkedAt = Number.NEGATIVE_INFINITY;
      // The next request waits for the read the change calls for, as for any changed banner.
      cached.stale = false;
    }
    this.#stale.forget(publicId);
    this.#missing.delete(publicId);
    const loading = this.#loading.get(publicId);
    if (loading) {
      loading.token.stale = true;
      this.#loading.delete(publicId);
    }
  }

  async #banner(publicId: string): Promise<CachedBanner | null> {
    const cached = this.#banners.get(publicId);
    if (cached && this.#now() - cached.checkedAt < this.options.revalidateMs) {
      // Least recently used goes first when the map is full: re-inserted on use.
      this.#keep(publicId, cached);
      return cached;
    }
    const missingSince = this.#missing.get(publicId);
    if (missingSince !== undefined && this.#now() - missingSince < this.options.revalidateMs) {
      return null;
    }
    // No copy to serve, and its last read failed for want of the daemon just now: that failure
    // again, without a call (failed-reads.ts).
    this.#stale.throwIfFailedRecently(publicId);
    let loading = this.#loading.get(publicId);
    if (!loading) {
      const token = { stale: false };
      const read = () => this.#load(publicId, cached, token);
      const held = this.#stale.holds(cached);
      // Reads in flight are bounded (reads-in-flight.ts): past its bound, a banner held
      // is served as held, marked stale, and one with no copy to serve is answered 503.
      const promise = (held ? this.#heldReads : this.#firstReads).start(read);
      if (!promise) {
        if (!held) throw readsAtBound("first", this.#firstReads.max);
        const atBound = readsAtBound("held", this.#heldReads.max);
        return this.#stale.heldWithoutRead(publicId, cached, atBound);
      }
      const current: Loading = { token, promise };
      this.#loading.set(publicId, current);
      const clear = () => {
        if (this.#loading.get(publicId) === current) this.#loading.delete(publicId);
      };
      current.promise.then(clear, clear);
      loading = current;
    }
    return this.#stale.whileRead(publicId, cached, loading);
  }

  async #load(
    publicId: string,
    previous: CachedBanner | undefined,
    token: ReadToken,
  ): Promise<CachedBanner | null> {
    let banner: PublishedBanner | null;
    try {
      banner = await this.options.fetchBanner(publicId);
    } catch (error) {
      return this.#stale.afterFailedRead(publicId, previous, token, error);
    }
    // Invalidated while the daemon answered: this answer may predate the change, so it answers
    // the requests waiting for it but is not kept.
    const current = !token.stale;
    this.#stale.answered(publicId, current);
    if (!banner) {
      if (current) {
        this.#drop(publicId);
        remember(this.#missing, publicId, this.#now(), MAX_MISSING);
      }
      return null;
    }
    this.#missing.delete(publicId);
    const fingerprint = sha256(toBinary(PublishedBannerSchema, banner));
    const checkedAt = this.#now();
    const read = { checkedAt, readAt: checkedAt, stale: false };
    const entry: CachedBanner =
      previous?.fingerprint === fingerprint
        ? { ...previous, ...read }
        : { banner, fingerprint, ...read, variants: { bodies: new Map(), bytes: 0 } };
    if (current) this.#keep(publicId, entry);
    return entry;
  }

  /** Sets a banner's entry as the most recent; the bytes of an entry it replaces leave the count. */
  #keep(publicId: string, entry: CachedBanner): void {
    // Nothing changes when an unchanged banner's new entry shares the replaced one's variants.
    const replaced = this.#banners.get(publicId);
    this.#keptBytes += entry.variants.bytes - (replaced?.variants.bytes ?? 0);
    const evicted = remember(this.#banners, publicId, entry, MAX_BANNERS);
    if (evicted) {
      this.#keptBytes -= evicted.value.variants.bytes;
      this.#stale.forget(evicted.key);
    }
  }

  #drop(publicId: string): void {
    const dropped = this.#banners.get(publicId);
    if (!dropped) return;
    this.#banners.delete(publicId);
    this.#stale.forget(publicId);
    this.#keptBytes -= dropped.variants.bytes;
  }

  /**
   * A location's response, built at once; counted once built, unless its location was dropped
   * meanwhile. A failed build is not kept: the next request tries again.
   */
  #build(publicId: string, cached: CachedBanner, location: Geo | null, key: string): KeptVariant {
    const { variants } = cached;
    const response = buildVariant(cached.banner, location).then(
      (built) => {
        variant.built = built;
        if (variants.bodies.get(key) === variant) {
          variant.bytes = bytesOf(built);
          this.#count(publicId, variants, variant.bytes);
        }
        return built;
      },
      (error: unknown) => {
        if (variants.bodies.get(key) === variant) variants.bodies.delete(key);
        throw error;
      },
    );
    this.#builds += 1;
    const variant: KeptVariant = { build: this.#builds, response, bytes: 0 };
    return variant;
  }

  /**
   * The recompression of a location's response, holding only its names (brotli-upgrades.ts): it
   * finds the response when its turn comes, and does nothing once the banner's current responses
   * no longer hold that build at that location (dropped, evicted, rebuilt, or the banner
   * republished). A queued one so keeps no bytes outside `maxBytes`.
   */
  #upgradeOf(publicId: string, key: string, build: number): BrotliUpgrade {
    const keptNow = () => {
      const variants = this.#banners.get(publicId)?.variants;
      const kept = variants?.bodies.get(key);
      return variants && kept?.build === build ? { variants, kept } : undefined;
    };
    return {
      build,
      kept: () => keptNow()?.kept.built,
      replaced: (bytes) => {
        const now = keptNow();
        if (!now) return;
        now.kept.bytes += bytes;
        this.#count(publicId, now.variants, bytes);
      },
    };
  }

  /**
   * Sets a location's response as the banner's most recently served; beyond MAX_VARIANTS the
   * least recently served leaves, its bytes with it (one still being built counts none, and is
   * not counted once built; one queued or being recompressed is not recompressed, or not counted
   * again, as its build is no longer found).
   */
  #keepLocation(publicId: string, variants: Variants, key: string, variant: KeptVariant): void {
    const dropped = remember(variants.bodies, key, variant, MAX_VARIANTS);
    if (dropped) this.#count(publicId, variants, -dropped.value.bytes);
  }

  /**
   * Counts the bytes of a built response, or those a recompressed one gained (negative when it
   * shrank), or those a dropped location held (negative); beyond the budget, least recently used
   * banners leave but this one.
   */
  #count(publicId: string, variants: Variants, bytes: number): void {
    variants.bytes += bytes;
    if (this.#banners.get(publicId)?.variants !== variants) return;
    this.#keptBytes += bytes;
    for (const oldest of this.#banners.keys()) {
      if (this.#keptBytes <= this.#maxBytes) break;
      if (oldest !== publicId) this.#drop(oldest);
    }
  }
}

/** The bytes a response holds in memory: its uncompressed, brotli and gzip bodies. */
function bytesOf(variant: LoaderVariant): number {
  return variant.identity.length + variant.br.length + variant.gzip.length;
}
