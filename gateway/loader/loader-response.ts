import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import { runtimeBundle } from "#gateway/loader/runtime-bundle.js";
import { type Geo, runtimeConfig } from "#gateway/loader/runtime-config.js";
import type { PublishedBanner } from "#gen/consent/v1/banner_pb.js";

const brotli = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

/**
 * Building a loader response (decisions §6): the runtime bundle with a banner's configuration for
 * a location, and its brotli and gzip bodies, made once and served from memory (loader-cache.ts).
 */

/**
 * The brotli quality a response is first built at. Measured on the loader test's banner (23.5 KB
 * raw): quality 5 takes about 1 ms of CPU for 9.6 KB, 7 and 9 give the same size for 2 and 25 ms,
 * 10 gives 9.1 KB for 14 ms, and 11 (BROTLI_MAX_QUALITY) 8.9 KB for about 40 ms. A response is
 * served at once at this quality; one asked for again is recompressed at the highest in the
 * background (brotli-upgrades.ts), so a location asked for once never costs the highest.
 */
const FIRST_BROTLI_QUALITY = 5;

/** One loader response, precompressed once when it is built (decisions §6). */
export interface LoaderVariant {
  /**
   * Base of the ETags; each encoding gets its own ("<hash>", W/"<hash>-br", "<hash>-gz"). A digest
   * of the uncompressed body, so the same for every compression of it.
   */
  hash: string;
  identity: Buffer;
  /** Replaced by a smaller encoding of the same `identity` once recompressed (brotliQuality). */
  br: Buffer;
  /** The quality `br` was compressed at: FIRST_BROTLI_QUALITY, then BROTLI_MAX_QUALITY. */
  brotliQuality: number;
  gzip: Buffer;
  /** The body depends on the visitor's location (the banner has jurisdiction rules). */
  variesByGeo: boolean;
  /**
   * Served while the daemon cannot be reached: the banner's last read failed, and this is what
   * the read before it gave (stale-if-error).
   */
  stale?: boolean;
}

/** A short digest: a response's ETag base, and the fingerprint of a banner's production side. */
export const sha256 = (data: Uint8Array | string) =>
  createHash("sha256").update(data).digest("base64url").slice(0, 27);

/**
 * A value as a JavaScript literal: its JSON, with `<` and the line and paragraph separators
 * written as escapes (the same string to the parser). No operator text then ends or comments out
 * a `<script>` the body is placed in (`</script>`, `<!--`), nor breaks a parser that takes the
 * separators for line ends inside a string.
 */
function scriptLiteral(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

/** A loader body in brotli (on libuv's thread pool, off the event loop). */
export function brotliBody(identity: Buffer, quality: number): Promise<Buffer> {
  return brotli(identity, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: quality,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
    },
  });
}

/**
 * The loader body: the runtime bundle with the configuration bound to its `__CONFIG__`, with its
 * brotli body at FIRST_BROTLI_QUALITY and its gzip one at level 9 (under 1 ms each).
 */
export async function buildVariant(
  banner: PublishedBanner,
  geo: Geo | null,
): Promise<LoaderVariant> {
  const config = scriptLiteral(runtimeConfig(banner, geo));
  const identity = Buffer.from(`(function(__CONFIG__){${await runtimeBundle()}})(${config});\n`);
  const [br, gz] = await Promise.all([
    brotliBody(identity, FIRST_BROTLI_QUALITY),
    gzipAsync(identity, { level: 9 }),
  ]);
  const variesByGeo = (banner.configuration?.jurisdictionRules.length ?? 0) > 0;
  return {
    hash: sha256(identity),
    identity,
    br,
    brotliQuality: FIRST_BROTLI_QUALITY,
    gzip: gz,
    variesByGeo,
  };
}
