import proxyAddr from "@fastify/proxy-addr";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import Negotiator from "negotiator";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { failureOf, type HttpError, httpErrorOf, sendPlainError } from "#gateway/errors.js";
import { LoaderCache } from "#gateway/loader/loader-cache.js";
import type { LoaderVariant } from "#gateway/loader/loader-response.js";
import { parseGeo } from "#gateway/loader/runtime-config.js";
import { refuseOtherMethods } from "#gateway/methods.js";

/**
 * decisions §6: browsers and CDNs keep a loader for 5 minutes, then revalidate with its ETag
 * (a 304 costs no body); a publish therefore reaches visitors within about 5 minutes.
 */
const CACHE_CONTROL = "public, max-age=300, stale-while-revalidate=60";
/**
 * A loader that varies on the geo header is kept by the visitor's browser alone: shared caches
 * may not honour `Vary` on it (Cloudflare's, where CF-IPCountry comes from, keys a `.js` on its
 * URL whatever the `Vary`), and would hand one country's rule, and its location, to every
 * visitor (an opt-out or notice default, granting all, to a visitor whose rule is opt-in).
 */
const CACHE_CONTROL_BY_LOCATION = "private, max-age=300, stale-while-revalidate=60";
/**
 * A loader served while the daemon cannot be reached (stale-if-error, loader-cache.ts) is kept a
 * minute instead of five, and offers caches no `stale-if-error` of their own: nothing keeps it
 * longer than a confirmed one, and once the daemon answers again browsers and CDNs come back for
 * the banner as re-read within about a minute (a 304 while it is unchanged: its ETag is the same).
 */
const STALE_CACHE_CONTROL = "public, max-age=60, stale-while-revalidate=60";
const STALE_CACHE_CONTROL_BY_LOCATION = "private, max-age=60, stale-while-revalidate=60";

function cacheControlOf(byLocation: boolean, stale: boolean): string {
  if (stale) return byLocation ? STALE_CACHE_CONTROL_BY_LOCATION : STALE_CACHE_CONTROL;
  return byLocation ? CACHE_CONTROL_BY_LOCATION : CACHE_CONTROL;
}
/** How long a gateway serves a banner before asking the daemon whether it changed. */
export const LOADER_REVALIDATE_MS = 30_000;

export interface LoaderRouteOptions {
  clients: DaemonClients;
  /** CONSENT_GEO_HEADER: a header set by a trusted proxy (e.g. CF-IPCountry). */
  geoHeader?: string;
  /**
   * CONSENT_TRUST_PROXY: the geo header is read only from a request whose peer is one of these
   * proxies; from any other peer it is a visitor's own claim, and ignored.
   */
  trustProxy?: string[];
  onPublicChange?: (listener: (publicId: string) => void) => void;
  revalidateMs?: number;
  /** CONSENT_LOADER_CACHE_MB in bytes; the cache's default when unset. */
  maxBytes?: number;
  /** How often a lasting outage is logged (GatewayOptions.repeatedFailureLogMs). */
  repeatedFailureLogMs?: number;
}

const LOADER_PATH = "/loader/:file";

type Encoding = "br" | "gzip" | "identity";

/** Ours, best first: brotli, then gzip, then none. */
const ENCODINGS: Encoding[] = ["br", "gzip", "identity"];

/**
 * The encoding to send (negotiator): the client's highest q-value, ours first among equals;
 * none when it refuses all three (`identity;q=0` alone), since a loader is better than a 406.
 */
function negotiate(headers: Record<string, string | string[] | undefined>): Encoding {
  // RFC 9110 §8.4.1.3: x-gzip is gzip, which negotiator does not know.
  const accepted = headers["accept-encoding"];
  const named = Array.isArray(accepted) ? accepted.join(",") : accepted;
  const acceptEncoding = named?.replace(/\bx-gzip\b/gi, "gzip");
  // negotiator 1.x takes the tie-break order as a second argument, which @types/negotiator
  // (written for 0.6) does not declare.
  const negotiator = new Negotiator({
    headers: { "accept-encoding": acceptEncoding },
  }) as unknown as {
    encoding(available: Encoding[], options: { preferred: Encoding[] }): Encoding | undefined;
  };
  return negotiator.encoding(ENCODINGS, { preferred: ENCODINGS }) ?? "identity";
}

/**
 * A digest of the uncompressed body, one per encoding. The brotli one is weak (RFC 9110 §8.8.1):
 * a response is first served at a quick brotli quality and its body replaced by a smaller one
 * of the same script once recompressed (brotli-upgrades.ts), and another gateway process may
 * serve either meanwhile. A strong tag would name two byte sequences; a weak one says what is
 * true, that they are the same script, so a browser or CDN revalidating across the change gets
 * a 304 instead of the script again. The uncompressed and gzip bodies never change once built.
 */
function etagOf(variant: LoaderVariant, encoding: Encoding): string {
  if (encoding === "br") return `W/"${variant.hash}-br"`;
  return `"${variant.hash}${encoding === "gzip" ? "-gz" : ""}"`;
}

const opaqueTag = (tag: string) => tag.trim().replace(/^W\//, "");

/** If-None-Match holds the current ETag (weak comparison, as RFC 9110 §13.1.2 asks for it). */
function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === "*") return true;
  return ifNoneMatch.split(",").some((tag) => opaqueTag(tag) === opaqueTag(etag));
}

/**
 * The 503 of a banner whose read failed for want of the daemon (failed-reads.ts): spec 7's body,
 * with a Retry-After of the seconds left until the daemon is asked for it again, as nothing
 * changes before, or until the daemon's own Retry-After ends if it asked for a later retry
 * (`secondsLeft`, counting down from the failure, not the daemon's figure as first answered).
 */
function retryAtNextRead(failure: HttpError, secondsLeft: number | undefined): HttpError {
  if (failure.status !== 503 || secondsLeft === undefined) return failure;
  return { ...failure, headers: { ...failure.headers, "Retry-After": String(secondsLeft) } };
}

function notFound(reply: FastifyReply): FastifyReply {
  return reply
    .code(404)
    .send({ error: "No active banner with that public Banner ID", code: "not_found" });
}

/**
 * GET /loader/{publicId}.js (decisions §6): the runtime and the banner's production configuration
 * in one script, from memory, with ETag, Cache-Control and brotli/gzip by Accept-Encoding.
 * Unknown and inactive banners are 404. While the daemon cannot be reached, a banner is served as
 * last read for up to a day (stale-if-error.ts); one never read, or read longer ago, is 503.
 */
export async function loaderRoutes(app: FastifyInstance, options: LoaderRouteOptions) {
  const cache = new LoaderCache({
    revalidateMs: options.revalidateMs ?? LOADER_REVALIDATE_MS,
    maxBytes: options.maxBytes,
    logger: app.log,
    repeatedFailureLogMs: options.repeatedFailureLogMs,
    async fetchBanner(publicId) {
      try {
        return (await options.clients.banners.getPublishedBanner({ publicId })).banner ?? null;
      } catch (error) {
        // The daemon's own not_found (its ErrorInfo's code); a NOT_FOUND without it is no answer
        // of the daemon's, and fails the request as on the REST routes (errors.ts).
        if (httpErrorOf(error).status === 404) return null;
        throw error;
      }
    },
  });
  options.onPublicChange?.((publicId) => cache.invalidate(publicId));
  // As the gateway begins to close (app.close, a signal's drain): no recompression starts while
  // the requests still in flight are answered, nor after (brotli-upgrades.ts).
  app.addHook("preClose", (done) => {
    cache.close();
    done();
  });
  app.addHook("onClose", (_app, done) => {
    cache.closeLog();
    done();
  });
  // No failure at a loader's address is kept by a cache, however it came (the handler, a method
  // refused, a request refused by the gateway's rules, the body budget): some CDNs keep a 4xx or
  // 5xx without Cache-Control for a while, and would hand it to every visitor of the sites that
  // embed the banner, past the outage or from one malformed request (a duplicated Host header).
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (reply.statusCode >= 400) reply.header("Cache-Control", "no-store");
    done(null, payload);
  });
  const geoHeader = options.geoHeader?.toLowerCase();
  // The header picks a jurisdiction rule, and each new location costs a compressed build: only a
  // trusted proxy may name it (a visitor could otherwise choose their own rule, or make the
  // gateway build a body per invented region).
  const trusted = options.trustProxy?.length ? proxyAddr.compile(options.trustProxy) : undefined;
  const geoOf = (request: FastifyRequest) => {
    const peer = request.socket.remoteAddress;
    if (!geoHeader || !trusted || !peer || !trusted(peer, 0)) return null;
    const value = request.headers[geoHeader];
    return parseGeo(Array.isArray(value) ? value[0] : value);
  };

  // HEAD served by the handler itself rather than Fastify's exposed HEAD route, which gives a
  // bodiless 304 `Content-Length: 0` (RFC 9110 §8.6: only the 200's length may be sent); Node
  // sends no body for HEAD, and a 200's Content-Length is the GET's.
  app.route({
    method: ["GET", "HEAD"],
    url: LOADER_PATH,
    exposeHeadRoute: false,
    handler: serveLoader,
  });
  refuseOtherMethods(app, LOADER_PATH, ["GET"], sendPlainError);

  async function serveLoader(request: FastifyRequest, reply: FastifyReply) {
    // The public id in either case, as everywhere it is read; the file name's `.js` as written.
    const publicId = /^([0-9a-fA-F-]{36})\.js$/.exec(
      (request.params as { file: string }).file,
    )?.[1];
    if (!publicId) return notFound(reply);
    const id = publicId.toLowerCase();
    let variant: LoaderVariant | null;
    try {
      variant = await cache.variant(id, geoOf(request));
    } catch (error) {
      const failure = failureOf(request, error);
      return sendPlainError(reply, retryAtNextRead(failure, cache.retryAfterSeconds(id)));
    }
    if (!variant) return notFound(reply);
    const encoding = negotiate(request.headers);
    const etag = etagOf(variant, encoding);
    const byLocation = variant.variesByGeo && !!geoHeader;
    reply.headers({
      "Content-Type": "text/javascript; charset=utf-8",
      "Cache-Control": cacheControlOf(byLocation, variant.stale === true),
      ETag: etag,
      Vary: byLocation ? `Accept-Encoding, ${options.geoHeader}` : "Accept-Encoding",
      // Lets a site load it with crossorigin/SRI, or under Cross-Origin-Embedder-Policy.
      "Access-Control-Allow-Origin": "*",
      "Cross-Origin-Resource-Policy": "cross-origin",
      "X-Content-Type-Options": "nosniff",
    });
    if (notModified(request.headers["if-none-match"], etag)) return reply.code(304).send();
    if (encoding !== "identity") reply.header("Content-Encoding", encoding);
    return reply.code(200).send(variant[encoding]);
  }
}
