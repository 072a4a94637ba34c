import type { Site } from "#daemon/banners/domains.js";

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
  | { kind: "absent" }
  | { kind: "opaque" }
  | { kind: "origin"; url: URL }
  | { kind: "invalid" };

/** Reads an Origin header's value (OriginHeader). */
export function readOriginHeader(value: string | undefined): OriginHeader {
  if (!value) return { kind: "absent" };
  if (value === "null") return { kind: "opaque" };
  const url = httpUrl(value);
  // The serialisation the URL gives back is the header itself only when the header was one.
  return url && url.origin === value.toLowerCase() ? { kind: "origin", url } : { kind: "invalid" };
}
