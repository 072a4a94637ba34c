import { getDomain, parse } from "tldts";

/** One DNS label: letters, digits and inner hyphens, 1-63 characters. */
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * True for a registrable-looking host name: two or more labels, a TLD that is not numeric (so IP
 * addresses are refused), 253 characters at most. IDNs arrive punycoded from URL parsing.
 */
function isDomainName(host: string): boolean {
  if (host.length > 253) return false;
  const labels = host.split(".");
  const tld = labels.at(-1) ?? "";
  return (
    labels.length >= 2 &&
    labels.every((label) => LABEL.test(label)) &&
    /[a-z]/.test(tld) &&
    !/^\d+$/.test(tld)
  );
}

/**
 * The hosts a browser reaches this machine by, which spec 4.3's "localhost" names: `localhost`
 * and its loopback addresses (RFC 6761 6.3), as WHATWG URL writes them (`127.1` is `127.0.0.1`,
 * `[0::1]` is `[::1]`). A developer's page is served from any of them, on any port.
 */
const LOCAL_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** True for `localhost` or a loopback address (LOCAL_HOSTS): a site that accepts any port. */
function isLocalHost(host: string): boolean {
  return LOCAL_HOSTS.has(host);
}

/**
 * spec 4.3: a bare hostname is normalized to an https:// URL and the result must be a valid domain
 * or localhost (`localhost`, `127.0.0.1` or `[::1]`: isLocalHost). A full http(s) URL is accepted as long as it names only a host and perhaps a port:
 * the scheme becomes https, a port other than the scheme's default is kept (the consent-log domain
 * check compares it, decisions §5). Returns null when invalid.
 */
export function normalizeDomain(input: string): string | null {
  const site = siteOf(input);
  return site ? `https://${site}` : null;
}

/** The host name of a domain as normalizeDomain accepts it, or null. */
export function hostOf(input: string): string | null {
  return parsedSite(input)?.host ?? null;
}

/**
 * A domain as normalizeDomain accepts it, as the log route's domain check keeps it: `host`, or
 * `host:port` when it names a port other than its scheme's default (`shop.example.com:8443`;
 * a local host never keeps one); null when invalid. The port is read as the scheme given names it, so
 * `http://shop.example.com:80` is the host alone, as Origin headers write it.
 */
export function siteOf(input: string): string | null {
  const site = parsedSite(input);
  return site ? siteText(site) : null;
}

/** A site's host, and its port: "" for its scheme's default. */
export interface Site {
  host: string;
  port: string;
}

/** A host and port as a site is written (siteOf): `host`, or `host:port` when a port is named. */
export function siteText(site: Site): string {
  return site.port ? `${site.host}:${site.port}` : site.host;
}

/** A domain as normalizeDomain accepts it (or a site as siteOf writes it), read; null when invalid. */
export function parsedSite(input: string): Site | null {
  const trimmed = input.trim();
  if (!trimmed) return null;
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed) ? trimmed : `https://${trimmed}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    return null; // Not a URL: the caller reports the field as invalid.
  }
  const onlyHost =
    url.pathname === "/" && !url.search && !url.hash && !url.username && !url.password;
  if (!onlyHost || (url.protocol !== "https:" && url.protocol !== "http:")) return null;
  // Port 0 names no port (RFC 6335): browsers load no page from it, so no choice could come.
  if (url.port === "0") return null;
  const host = url.hostname.toLowerCase();
  // 443 names https' default: `https://host:443` is the host alone, however it was written. A
  // local site accepts any port (hostAllowed), so it keeps none.
  const port = url.port === "443" || isLocalHost(host) ? "" : url.port;
  return isLocalHost(host) || isDomainName(host) ? { host, port } : null;
}

/**
 * True for a host that is itself a public suffix, in the ICANN or the private part of the Public
 * Suffix List (co.uk, github.io): no one site owns it, and the log route's subdomain rule would
 * let every site under it post choices to the banner (decisions §5).
 */
function isPublicSuffix(host: string): boolean {
  return !isLocalHost(host) && getDomain(host, { allowPrivateDomains: true }) === null;
}

export const PUBLIC_SUFFIX_MESSAGE =
  "must be a domain a site owns, not a public suffix such as co.uk or github.io";

/** The rule for banner domains: true unless the value names a public suffix (invalid is another rule's). */
export function notPublicSuffix(value: string): boolean {
  const host = hostOf(value);
  return host === null || !isPublicSuffix(host);
}

/**
 * True when a public suffix of the Public Suffix List (ICANN or private part) lies between
 * `host` and `siteHost`, its subdomain: `bucket.s3.amazonaws.com` under `amazonaws.com`, whose
 * `s3.amazonaws.com` lets anyone have a site. Such a host belongs to someone else than the site's
 * owner, as a public suffix named as a domain would (isPublicSuffix). Names the list does not know
 * (`dev.localhost`, `a.shop.internal`) have none.
 */
function crossesPublicSuffix(host: string, siteHost: string): boolean {
  const { publicSuffix, isIcann, isPrivate } = parse(host, {
    allowPrivateDomains: true,
    extractHostname: false,
  });
  if (!publicSuffix || !(isIcann || isPrivate)) return false;
  return publicSuffix === siteHost || publicSuffix.endsWith(`.${siteHost}`);
}

/**
 * decisions §5: a request's host matches a site (siteOf: `host` or `host:port`) when it equals the
 * site's host or is a subdomain of it, and its port is the site's: the scheme's default for a site
 * naming none (`https://shop.example.com` and `http://shop.example.com` alike, not
 * `https://shop.example.com:8443`). Local sites (`localhost`, `127.0.0.1`, `[::1]`) accept any port. `requestPort` is the URL's
 * port as WHATWG URL reads it: "" for the scheme's default. A subdomain under a public suffix
 * within the site is not the site's (crossesPublicSuffix), for the reason banner domains may not
 * be public suffixes.
 */
export function hostAllowed(
  requestHost: string,
  requestPort: string,
  allowedSites: readonly Site[],
): boolean {
  const host = requestHost.toLowerCase();
  // An empty label (".shop.example.com", "a..shop.example.com") is no host a browser sends.
  if (host.split(".").includes("")) return false;
  return allowedSites.some((site) => {
    if (host !== site.host) {
      if (!host.endsWith(`.${site.host}`) || crossesPublicSuffix(host, site.host)) return false;
    }
    return isLocalHost(site.host) || requestPort === site.port;
  });
}
