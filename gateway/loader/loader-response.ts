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

/** One loader response, precompressed once when it is built (decisions §6). */
export interface LoaderVariant {
  /** Base of the strong ETags; each encoding gets its own ("<hash>", "<hash>-br", "<hash>-gz"). */
  hash: string;
  identity: Buffer;
  br: Buffer;
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

/**
 * The loader body: the runtime bundle with the configuration bound to its `__CONFIG__`. Brotli at
 * its highest quality by default: a body is built once and served many times (decisions §6).
 */
export async function buildVariant(
  banner: PublishedBanner,
  geo: Geo | null,
  brotliQuality: number = constants.BROTLI_MAX_QUALITY,
): Promise<LoaderVariant> {
  const config = scriptLiteral(runtimeConfig(banner, geo));
  const identity = Buffer.from(`(function(__CONFIG__){${await runtimeBundle()}})(${config});\n`);
  const [br, gz] = await Promise.all([
    brotli(identity, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: brotliQuality,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
      },
    }),
    gzipAsync(identity, { level: 9 }),
  ]);
  const variesByGeo = (banner.configuration?.jurisdictionRules.length ?? 0) > 0;
  return { hash: sha256(identity), identity, br, gzip: gz, variesByGeo };
}
