import type { Site } from "#daemon/banners/domains.js";
import { boundedMemo } from "#daemon/memo.js";

/** An address (a Referer, a pageUrl, an Origin) read as an http(s) URL; null for anything else. */
export function httpUrl(value: string | undefined): URL | null {
  if (!value) return null;
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? url : null;
  } catch {
    return null; // Not an address: nothing of it is read.
  }
}

/** A URL's host as the domain check reads it: lower case, without a fully qualified name's dot. */
export function hostName(url: URL): string {
  return url.hostname.toLowerCase().replace(/\.$/, "");
}

/** A URL's site as the domain check judges it: its host (hostName), its port "" for the default. */
export function siteOfUrl(url: URL): Site {
  return { host: hostName(url), port: url.port };
}

/**
 * What an Origin header says, read the same way by the daemon's domain check, the gateway's CORS
 * echo and the preferences page's check that a form is its own (decisions §5):
 * - `absent`: no header (or an empty one): the Referer is read instead;
 * - `opaque`: `null`, the origin of a sandboxed frame, a `file:` page, or a request a redirect
 *   took across origins: it names no host, so the Referer is read, as when no Origin is sent;
 * - `origin`: one http(s) origin as browsers serialise it (RFC 6454 6.2: `scheme://host[:port]`,
 *   the host punycoded, no default port), letter case aside, since scheme and host are
 *   case-insensitive;
 * - `invalid`: anything else, which no browser sends: two origins (Node joins a repeated header
 *   into `a, b`), a path, a query, a fragment, credentials, a default port written out, a host
 *   not punycoded, another scheme, or no URL at all.
 */
export type OriginHeader =
  | { readonly kind: "absent" }
  | { readonly kind: "opaque" }
  | {
      readonly kind: "origin";
      /** The origin's serialisation: the header in lower case. */
      readonly origin: string;
      /** Its site, as the domain check judges it (siteOfUrl). */
      readonly site: Readonly<Site>;
    }
  | { readonly kind: "invalid" };

const ABSENT: OriginHeader = Object.freeze({ kind: "absent" });
const OPAQUE: OriginHeader = Object.freeze({ kind: "opaque" });
const INVALID: OriginHeader = Object.freeze({ kind: "invalid" });

/**
 * The reading of each Origin value lately read, in this process's memory: a banner's posts come
 * from a few origins, and each post's Origin is read twice, by the gateway's CORS echo and by the
 * daemon's domain check, a URL parse each. Values longer than any origin a browser sends (a host
 * is at most 253 characters) are read without being kept, so a flood of long headers keeps
 * nothing large.
 */
const readKept = boundedMemo(1_024, readOriginValue);
const MAX_KEPT_ORIGIN = 300;

/** Reads an Origin header's value (OriginHeader). The answer is frozen: it may be shared. */
export function readOriginHeader(value: string | undefined): OriginHeader {
  if (!value) return ABSENT;
  if (value === "null") return OPAQUE;
  return value.length <= MAX_KEPT_ORIGIN ? readKept(value) : readOriginValue(value);
}

function readOriginValue(value: string): OriginHeader {
  const url = httpUrl(value);
  // The serialisation the URL gives back is the header itself only when the header was one.
  const origin = url?.origin;
  if (!url || origin !== value.toLowerCase()) return INVALID;
  return Object.freeze({ kind: "origin", origin, site: Object.freeze(siteOfUrl(url)) });
}
