import { randomInt } from "node:crypto";
import { v7 as uuidv7 } from "uuid";
import { z } from "zod";
import type { BannerRecord, BannerStore, TelemetryLevel } from "#daemon/banners/banner-store.js";
import { hostAllowed, parsedSite, type Site, siteText } from "#daemon/banners/domains.js";
import type { ConsentLogQuery, ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import {
  hostName,
  httpUrl,
  readOriginHeader,
  siteOfUrl,
} from "#daemon/consent-log/request-origin.js";
import { clipped, DomainError, invalidRequest } from "#daemon/errors.js";
import {
  consentServices,
  integer,
  isoDateTime,
  LANGUAGE_CODE_MAX,
  label,
  MAX_REVISION,
  type ProtoTimestamp,
  protoTimeBound,
  usOptOutPurposes,
  uuid,
} from "#daemon/validation/rules.js";
import { check, parseOrThrow } from "#daemon/validation/violations.js";

/**
 * The log route's body limit: 20 KB, the limit spec 8 sets for the subject routes, since
 * decisions §5 names none (docs/banner-runtime.md). A beacon's payload is well under 1 KB.
 */
export const LOG_BODY_LIMIT = 20 * 1024;
/** The longest page address a row keeps (docs/banner-runtime.md); a longer one is dropped. */
export const MAX_KEPT_PAGE_URL = 4_096;
/** spec 8: POST /api/consent/log requests per client IP per minute. */
export const LOG_IP_LIMIT = 1_000;

/** spec 3.3: the allowed values of `method`. */
export const CONSENT_LOG_METHODS = [
  "consent_given",
  "consent_changed",
  "consent_default",
  "accept_all",
  "accept_necessary",
] as const;
export type ConsentLogMethod = (typeof CONSENT_LOG_METHODS)[number];

/** spec 3.3: every method but consent_default is a visitor's explicit choice. */
export function isExplicitChoice(method: string): boolean {
  return method !== "consent_default";
}

/**
 * The opt-in of `logs stats` (cli/README.md, "Consent logs"): a row's preferences accept
 * (true) at least one category that its banner does not mark required, i.e. more than the
 * necessary minimum.
 */
export function isOptIn(
  preferences: Readonly<Record<string, boolean>>,
  requiredCategories: readonly string[],
): boolean {
  return Object.entries(preferences).some(
    ([name, accepted]) => accepted === true && !requiredCategories.includes(name),
  );
}

/**
 * decisions §5: the log payload. A plain (stripping) object: unknown fields are ignored, since
 * the runtime evolves, and so never reach the store. The strings a row keeps are labels: no
 * control characters, since operators read rows in a terminal. `pageUrl` is any string: it is
 * only a source for the reduced address (reducePageUrl), and an address that cannot serve is
 * dropped rather than costing the visitor's choice.
 */
const logBody = z.object({
  bannerId: uuid,
  preferences: z
    .record(label(1, 100), z.boolean())
    .refine((value) => Object.keys(value).length <= 50, "must have at most 50 entries"),
  method: z.enum(CONSENT_LOG_METHODS, {
    error: (issue) => (issue.input === undefined ? "is required" : undefined),
  }),
  timestamp: isoDateTime,
  consentId: uuid.optional(),
  revision: integer(0, MAX_REVISION).optional(),
  languageCode: label(1, LANGUAGE_CODE_MAX).optional(),
  country: label(1, 64).optional(),
  region: label(1, 64).optional(),
  matchedRuleId: label(1, 64).optional(),
  gpc: z.boolean().optional(),
  purposeChoices: z.object(usOptOutPurposes).optional(),
  // The accepted categories' services, as the runtime's state has them (spec 2.4).
  services: consentServices
    .refine((value) => Object.keys(value).length <= 50, "must have at most 50 entries")
    .optional(),
  pageUrl: z.string().optional(),
});

export type ConsentLogBody = z.infer<typeof logBody>;

/** Validates a log payload (decisions §5); failures are 400 invalid_request with details. */
export function readConsentLogBody(body: unknown): ConsentLogBody {
  return parseOrThrow(logBody, body, (violations) => invalidRequest(violations));
}

/** decisions §5: how far a client timestamp may lie before or after the time of receipt. */
const MAX_PAST_MS = 24 * 60 * 60_000;
const MAX_FUTURE_MS = 5 * 60_000;

/**
 * decisions §5: a client timestamp outside [received − 24 h, received + 5 min] is clamped to the
 * nearest bound and marked, so a wrong device clock cannot back- or post-date a record.
 */
export function clampTimestamp(
  timestamp: string,
  receivedAt: Date,
): { occurredAt: Date; timestampClamped: boolean } {
  const client = Date.parse(timestamp);
  const earliest = receivedAt.getTime() - MAX_PAST_MS;
  const latest = receivedAt.getTime() + MAX_FUTURE_MS;
  const bounded = Math.min(Math.max(client, earliest), latest);
  return { occurredAt: new Date(bounded), timestampClamped: bounded !== client };
}

/**
 * decisions §5: the page address kept with a row, `pageUrl` else the Referer, reduced to the
 * banner's telemetry level: `none` keeps nothing, `origin` scheme and host, `path` adds the path
 * (never the query, the fragment, credentials or path parameters such as `;jsessionid=…`, which
 * may identify the visitor), its host in lower case without a fully qualified name's dot. An address on a host the banner is not configured for is not kept
 * (the row is proof of consent on the banner's site; the runtime's pageUrl is always the page it
 * runs on), nor is one longer than MAX_KEPT_PAGE_URL once reduced; the Referer serves instead
 * when it can.
 */
export function reducePageUrl(
  pageUrl: string | undefined,
  referer: string,
  level: TelemetryLevel,
  bannerSites: readonly Site[],
): string | undefined {
  if (level === "none") return undefined;
  const reduced = (value: string | undefined) => {
    const url = httpUrl(value);
    const host = url && hostName(url);
    if (!url || !host || !hostAllowed(host, url.port, bannerSites)) return undefined;
    // Kept with its host as the domain check read it: `shop.example.com.` is `shop.example.com`.
    // The setter re-parses the whole address, so it runs only when the host changes.
    if (url.hostname !== host) url.hostname = host;
    const path = url.pathname.replace(/;[^/]*/g, "");
    const kept = level === "origin" ? url.origin : `${url.origin}${path}`;
    return kept.length <= MAX_KEPT_PAGE_URL ? kept : undefined;
  };
  return reduced(pageUrl) ?? reduced(referer);
}

export interface LogIdGenerator {
  /** The next id, for a row received at `receivedAt`. */
  next(receivedAt: Date): string;
  /** Makes every later id sort above `id` (another daemon's, or one stored before a restart). */
  raise(id: string): void;
}

/**
 * consentLogIds: UUIDv7 from the time of receipt, strictly increasing within this process even
 * when rows share a millisecond or the clock steps back, and above every id it is raised to (the
 * store's newest: ConsentLogStore.newestId), so "newest first" and "the newest row of a
 * consentId" follow the order rows were written across daemons and restarts too. An id is never
 * below its receipt's millisecond; after a clock stepped back it runs ahead of it.
 */
export function createLogIdGenerator(): LogIdGenerator {
  let lastMs = Number.NEGATIVE_INFINITY;
  let seq = 0;
  return {
    next(receivedAt) {
      const ms = receivedAt.getTime();
      if (ms > lastMs) {
        lastMs = ms;
        seq = randomInt(0, 2 ** 30); // leaves room to count up within one millisecond
      } else if (++seq > 0xffffffff) {
        lastMs += 1;
        seq = 0;
      }
      return uuidv7({ msecs: lastMs, seq });
    },
    raise(id) {
      const ms = idMillis(id);
      const idSeq = seqOf(id);
      // The next id counts up from it, in its millisecond, unless the clock has passed it.
      if (ms > lastMs || (ms === lastMs && idSeq > seq)) {
        lastMs = ms;
        seq = idSeq;
      }
    },
  };
}

/** The 32-bit counter a UUIDv7 of the uuid package carries after its millisecond (v7Bytes). */
function seqOf(id: string): number {
  const hex = id.replaceAll("-", "");
  const byte = (i: number) => Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return (
    (((byte(6) & 0x0f) << 28) |
      (byte(7) << 20) |
      ((byte(8) & 0x3f) << 14) |
      (byte(9) << 6) |
      (byte(10) >>> 2)) >>>
    0
  );
}

/** The millisecond a UUIDv7 carries in its first 48 bits. */
export function idMillis(id: string): number {
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

/**
 * The lowest UUIDv7 string of a millisecond: every id of that millisecond or later sorts above.
 * createLogIdGenerator never gives a row an id below its receipt's millisecond (a clock that
 * stepped back only moves ids ahead of it), so `lowestIdAt(since)` bounds the ids of the rows
 * received at `since` or later.
 */
export function lowestIdAt(ms: number): string {
  const hex = Math.max(0, ms).toString(16).padStart(12, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}

const timeRange = z.object({ since: protoTimeBound.optional(), until: protoTimeBound.optional() });

/** Whether a request's time `a` is at or after `b`, to the nanosecond. */
function notBefore(a: ProtoTimestamp, b: ProtoTimestamp): boolean {
  return a.seconds > b.seconds || (a.seconds === b.seconds && a.nanos >= b.nanos);
}

/**
 * A log query (ListConsentLogs, and without paging the stats, tail and export): page size, the
 * page token (the previous page's last id), the banner (a public id, as rows name it: any other
 * text, such as a mistyped id, would select nothing without a word), the methods, and the time
 * range, each a time within google.protobuf.Timestamp's range, read as Dates (protoTimeBound:
 * rows are received to the millisecond, so each bound is the first millisecond at or after it).
 */
export function readLogQuery(request: {
  pageSize?: number;
  pageToken?: string;
  bannerId: string;
  methods: readonly string[];
  since?: ProtoTimestamp;
  until?: ProtoTimestamp;
  consentId?: string;
}) {
  const { pageSize = 0, pageToken = "", bannerId, methods, consentId = "" } = request;
  const read = check(timeRange, { since: request.since, until: request.until });
  const violations = "violations" in read ? read.violations : [];
  const range = "value" in read ? read.value : {};
  if (pageSize < 0 || pageSize > 1_000) {
    violations.push({ field: "pageSize", message: "pageSize must be from 1 to 1000" });
  }
  if (pageToken && !uuid.safeParse(pageToken).success) {
    violations.push({ field: "pageToken", message: "pageToken is not a token this service made" });
  }
  if (bannerId && !uuid.safeParse(bannerId).success) {
    violations.push({
      field: "bannerId",
      message: "bannerId must be a UUID (a banner's publicId)",
    });
  }
  if (consentId && !uuid.safeParse(consentId).success) {
    violations.push({
      field: "consentId",
      message: "consentId must be a UUID (the consentId of a consent log row)",
    });
  }
  const unknown = methods.filter((m) => !(CONSENT_LOG_METHODS as readonly string[]).includes(m));
  if (unknown.length > 0) {
    violations.push({
      field: "methods",
      message: `methods must be among ${CONSENT_LOG_METHODS.join(", ")}; unknown: ${unknown.join(", ")}`,
    });
  }
  // An empty range selects nothing by construction: a mistake, as consentctl treats it. Judged
  // on the times as sent: one within a millisecond is not empty, though it holds no row.
  if (range.since && range.until && request.since && request.until) {
    if (notBefore(request.since, request.until)) {
      violations.push({ field: "until", message: "until must be after since" });
    }
  }
  if (violations.length > 0) throw invalidRequest(violations);
  return {
    limit: pageSize || 100,
    beforeId: pageToken || undefined,
    publicId: bannerId ? bannerId.toLowerCase() : undefined,
    methods: methods.length > 0 ? methods : undefined,
    consentId: consentId ? consentId.toLowerCase() : undefined,
    ...range,
  };
}

/**
 * readLogQuery for a team's log, and its banner filter checked against the team's banners: a
 * public id, as rows name their banner; a banner's own id, a UUID too, would select nothing
 * without a word (the REST paths take the own id, so the two are easily swapped), and is refused
 * naming the public id to use. Costs a read only when no banner of the team has the filter as
 * its public id. The team's banner the filter names comes along, for callers that need it.
 */
export async function readTeamLogQuery(
  banners: Pick<BannerStore, "get" | "getByPublicId">,
  teamId: string,
  request: Parameters<typeof readLogQuery>[0],
) {
  const query = readLogQuery(request);
  const { publicId } = query;
  if (publicId === undefined) return { query };
  const banner = await banners.getByPublicId(publicId);
  if (banner?.teamId === teamId) return { query, banner };
  const own = await banners.get(teamId, publicId);
  if (!own) return { query };
  throw invalidRequest([
    {
      field: "bannerId",
      message: `bannerId must be a banner's publicId: ${publicId} is the id of the banner whose publicId is ${own.publicId}`,
    },
  ]);
}

/** Each banner record's sites, read once (a record is served from the read cache for a while). */
const sitesOfBanner = new WeakMap<BannerRecord, readonly Site[]>();

/**
 * The sites a banner's log posts may come from: its domain and production additionalDomains
 * (stored as siteOf writes them, `host` or `host:port`), read once per banner record rather than
 * on every post.
 */
export function bannerSites(banner: BannerRecord): readonly Site[] {
  let sites = sitesOfBanner.get(banner);
  if (!sites) {
    const domains = [banner.domain, ...banner.production.configuration.additionalDomains];
    sites = domains.flatMap((domain) => parsedSite(domain) ?? []);
    sitesOfBanner.set(banner, sites);
  }
  return sites;
}

/**
 * decisions §5: the host of Origin (else Referer) must be one of the banner's hosts (bannerSites:
 * its domain and production additionalDomains), or a subdomain of one, on the port that site
 * names (any port for localhost: hostAllowed). Origin is read as the gateway reads it for CORS
 * (readOriginHeader): an opaque `null` names no host, so the Referer is read as when no Origin is
 * sent (a request a redirect took across origins carries both); an Origin no browser sends (a
 * path, two origins) is refused, rather than read for a host it does not name as an origin.
 * With no host from either header the post is refused.
 */
export function authorizeOrigin(sites: readonly Site[], origin: string, referer: string): void {
  const read = readOriginHeader(origin);
  if (read.kind === "invalid") throw domainNotAuthorized(NOT_AN_ORIGIN);
  const refererUrl = read.kind === "origin" ? null : httpUrl(referer);
  const site = read.kind === "origin" ? read.site : refererUrl && siteOfUrl(refererUrl);
  if (!site) throw domainNotAuthorized(NO_ORIGIN);
  if (hostAllowed(site.host, site.port, sites)) return;
  // The site as sent may be long: its quote is cut, so the sentence is still whole.
  throw domainNotAuthorized(
    `${clipped(siteText(site), 200)} is not a domain this banner is configured for`,
  );
}

const NO_ORIGIN = "The request names no origin: send it from a page of the banner's domain";
const NOT_AN_ORIGIN =
  "The request's Origin is not one origin as browsers send it (scheme://host[:port]): send it from a page of the banner's domain";

function domainNotAuthorized(message: string): DomainError {
  return new DomainError("forbidden", "domain_not_authorized", message);
}

/**
 * Whether a row passes a log query's filters other than team and position (publicId, methods,
 * since, until): what a store applies beside its key range, and a tail to the team's rows it reads.
 */
export function matchesLogFilters(
  row: ConsentLogRecord,
  query: Omit<ConsentLogQuery, "teamId" | "beforeId" | "limit">,
): boolean {
  if (query.publicId !== undefined && row.publicId !== query.publicId) return false;
  if (query.methods !== undefined && !query.methods.includes(row.method)) return false;
  if (query.consentId !== undefined && row.consentId !== query.consentId) return false;
  if (query.since !== undefined && row.receivedAt < query.since) return false;
  if (query.until !== undefined && row.receivedAt >= query.until) return false;
  return true;
}
