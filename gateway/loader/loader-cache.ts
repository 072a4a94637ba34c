import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import { toBinary } from "@bufbuild/protobuf";
import { runtimeBundle } from "#gateway/loader/runtime-bundle.js";
import { type Geo, runtimeConfig, variantGeo, variantKey } from "#gateway/loader/runtime-config.js";
import { type PublishedBanner, PublishedBannerSchema } from "#gen/consent/v1/banner_pb.js";

const brotli = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

/** One loader response, precompressed once when it is built (decisions §6). */
export interface LoaderVariant {
  /** Base of the strong ETags; each encoding gets its own ("<hash>", "<hash>-br", "<hash>-gz"). */
  hash: string;
  identity: Buffer;
  br: Buffer;
  gzip: Buffer;
  /** The body depends on the visitor's location (the banner has jurisdiction rules). */
  variesByGeo: boolean;
}

interface CachedBanner {
  banner: PublishedBanner;
  fingerprint: string;
  checkedAt: number;
  variants: Map<string, Promise<LoaderVariant>>;
}

export interface LoaderCacheOptions {
  /** The active banner's production side, or null when the banner is unknown or inactive. */
  fetchBanner(publicId: string): Promise<PublishedBanner | null>;
  /** How long a banner is served before the daemon is asked again (other gateways' publishes). */
  revalidateMs: number;
  now?: () => number;
}

/** Bounds on memory: banners kept, locations kept per banner, and public ids known to be missing. */
const MAX_BANNERS = 5_000;
const MAX_VARIANTS = 300;
const MAX_MISSING = 10_000;

const sha256 = (data: Uint8Array | string) =>
  createHash("sha256").update(data).digest("base64url").slice(0, 27);

/** The loader body: the runtime bundle with the configuration bound to its `__CONFIG__`. */
async function buildVariant(banner: PublishedBanner, geo: Geo | null): Promise<LoaderVariant> {
  const config = JSON.stringify(runtimeConfig(banner, geo));
  const identity = Buffer.from(`(function(__CONFIG__){${await runtimeBundle()}})(${config});\n`);
  const [br, gz] = await Promise.all([
    brotli(identity, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
      },
    }),
    gzipAsync(identity, { level: 9 }),
  ]);
  const variesByGeo = (banner.configuration?.jurisdictionRules.length ?? 0) > 0;
  return { hash: sha256(identity), identity, br, gzip: gz, variesByGeo };
}

/** A read of a banner from the daemon in flight; `stale` once the banner changed meanwhile. */
interface Loading {
  token: { stale: boolean };
  promise: Promise<CachedBanner | null>;
}

/**
 * Loader responses served from memory (decisions §6). A banner is re-checked against the daemon
 * on its next request once this process learns of a change (invalidate, wired to the daemon's
 * publish hook in single-process mode and to the banner routes a stand-alone gateway relays), and
 * otherwise after `revalidateMs`, which is how a publish through another gateway or daemon reaches
 * this one; a banner whose production side is unchanged keeps its compressed bodies. Concurrent
 * requests for one banner share one daemon call. An unknown or inactive banner is remembered as
 * such for as long (a site whose banner was switched off keeps embedding its loader), in a map of
 * its own, so ids that do not exist never push a live banner's bodies out of memory.
 */
export class LoaderCache {
  readonly #banners = new Map<string, CachedBanner>();
  /** Public ids the daemon answered "none" for, with when it did. */
  readonly #missing = new Map<string, number>();
  readonly #loading = new Map<string, Loading>();
  readonly #now: () => number;

  constructor(private readonly options: LoaderCacheOptions) {
    this.#now = options.now ?? Date.now;
  }

  /** The response for a visitor at `geo`, or null for an unknown or inactive banner. */
  async variant(publicId: string, geo: Geo | null): Promise<LoaderVariant | null> {
    const cached = await this.#banner(publicId);
    if (!cached) return null;
    const location = variantGeo(cached.banner, geo);
    const key = variantKey(location);
    let variant = cached.variants.get(key);
    if (!variant) {
      if (cached.variants.size >= MAX_VARIANTS) cached.variants.clear();
      variant = buildVariant(cached.banner, location);
      cached.variants.set(key, variant);
      // A failed build is not kept: the next request tries again.
      variant.catch(() => cached.variants.delete(key));
    }
    return variant;
  }

  /**
   * Marks a banner for a new read on its next request, and any answer for it still in flight as
   * stale (it may predate the change).
   */
  invalidate(publicId: string): void {
    const cached = this.#banners.get(publicId);
    if (cached) cached.checkedAt = Number.NEGATIVE_INFINITY;
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
      remember(this.#banners, publicId, cached, MAX_BANNERS);
      return cached;
    }
    const missingSince = this.#missing.get(publicId);
    if (missingSince !== undefined && this.#now() - missingSince < this.options.revalidateMs) {
      return null;
    }
    let loading = this.#loading.get(publicId);
    if (!loading) {
      const token = { stale: false };
      const current: Loading = { token, promise: this.#load(publicId, cached, token) };
      this.#loading.set(publicId, current);
      const clear = () => {
        if (this.#loading.get(publicId) === current) this.#loading.delete(publicId);
      };
      current.promise.then(clear, clear);
      loading = current;
    }
    return loading.promise;
  }

  async #load(
    publicId: string,
    previous: CachedBanner | undefined,
    token: { stale: boolean },
  ): Promise<CachedBanner | null> {
    const banner = await this.options.fetchBanner(publicId);
    // Invalidated while the daemon answered: this answer may predate the change, so it answers
    // the requests waiting for it but is not kept.
    const current = !token.stale;
    if (!banner) {
      if (current) {
        this.#banners.delete(publicId);
        remember(this.#missing, publicId, this.#now(), MAX_MISSING);
      }
      return null;
    }
    this.#missing.delete(publicId);
    const fingerprint = sha256(toBinary(PublishedBannerSchema, banner));
    const checkedAt = this.#now();
    const entry: CachedBanner =
      previous?.fingerprint === fingerprint
        ? { ...previous, checkedAt }
        : { banner, fingerprint, checkedAt, variants: new Map() };
    if (current) remember(this.#banners, publicId, entry, MAX_BANNERS);
    return entry;
  }
}

/** Sets a map's entry as its most recent, dropping the least recent beyond `max`. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
}
