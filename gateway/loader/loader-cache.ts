import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import { toBinary } from "@bufbuild/protobuf";
import { runtimeBundle } from "#gateway/loader/runtime-bundle.js";
import { type Geo, runtimeConfig, variantKey } from "#gateway/loader/runtime-config.js";
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

/** Bounds on memory: banners kept, and locations kept per banner. */
const MAX_BANNERS = 5_000;
const MAX_VARIANTS = 300;

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

/**
 * Loader responses served from memory (decisions §6). A banner's responses are dropped at once
 * when this process learns of a change (invalidate, wired to the daemon's publish hook in
 * single-process mode) and otherwise re-checked against the daemon after `revalidateMs`, which is
 * how a publish through another gateway or daemon reaches this one; an unchanged banner keeps its
 * compressed bodies. Concurrent requests for one banner share one daemon call.
 */
export class LoaderCache {
  readonly #banners = new Map<string, CachedBanner>();
  readonly #loading = new Map<string, Promise<CachedBanner | null>>();
  readonly #invalidations = new Map<string, number>();
  readonly #now: () => number;

  constructor(private readonly options: LoaderCacheOptions) {
    this.#now = options.now ?? Date.now;
  }

  /** The response for a visitor at `geo`, or null for an unknown or inactive banner. */
  async variant(publicId: string, geo: Geo | null): Promise<LoaderVariant | null> {
    const cached = await this.#banner(publicId);
    if (!cached) return null;
    const key = variantKey(cached.banner, geo);
    let variant = cached.variants.get(key);
    if (!variant) {
      if (cached.variants.size >= MAX_VARIANTS) cached.variants.clear();
      variant = buildVariant(cached.banner, geo);
      cached.variants.set(key, variant);
      // A failed build is not kept: the next request tries again.
      variant.catch(() => cached.variants.delete(key));
    }
    return variant;
  }

  /** Forgets a banner, and any answer for it still in flight, so the next request reads it anew. */
  invalidate(publicId: string): void {
    this.#invalidations.set(publicId, (this.#invalidations.get(publicId) ?? 0) + 1);
    this.#banners.delete(publicId);
    this.#loading.delete(publicId);
  }

  async #banner(publicId: string): Promise<CachedBanner | null> {
    const cached = this.#banners.get(publicId);
    if (cached && this.#now() - cached.checkedAt < this.options.revalidateMs) {
      // Least recently used goes first when the map is full: re-insert on use.
      this.#banners.delete(publicId);
      this.#banners.set(publicId, cached);
      return cached;
    }
    let loading = this.#loading.get(publicId);
    if (!loading) {
      loading = this.#load(publicId, cached);
      this.#loading.set(publicId, loading);
      const clear = () => {
        if (this.#loading.get(publicId) === loading) this.#loading.delete(publicId);
      };
      loading.then(clear, clear);
    }
    return loading;
  }

  async #load(publicId: string, previous: CachedBanner | undefined): Promise<CachedBanner | null> {
    const invalidations = this.#invalidations.get(publicId) ?? 0;
    const banner = await this.options.fetchBanner(publicId);
    // An invalidation while the daemon answered: this answer may predate the change.
    const current = (this.#invalidations.get(publicId) ?? 0) === invalidations;
    if (!banner) {
      if (current) this.#banners.delete(publicId);
      return null;
    }
    const fingerprint = sha256(toBinary(PublishedBannerSchema, banner));
    const checkedAt = this.#now();
    const entry: CachedBanner =
      previous?.fingerprint === fingerprint
        ? { ...previous, checkedAt }
        : { banner, fingerprint, checkedAt, variants: new Map() };
    if (current) {
      this.#banners.delete(publicId);
      this.#banners.set(publicId, entry);
      if (this.#banners.size > MAX_BANNERS) {
        const oldest = this.#banners.keys().next().value;
        if (oldest !== undefined) this.#banners.delete(oldest);
      }
    }
    return entry;
  }
}
