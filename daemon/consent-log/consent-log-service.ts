import { randomUUID } from "node:crypto";
import { EventEmitter, once } from "node:events";
import { toJson } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Authenticator } from "#daemon/auth/authenticator.js";
import { activeBanner } from "#daemon/banners/active-banner.js";
import type { BannerRecord } from "#daemon/banners/banner-store.js";
import type { Site } from "#daemon/banners/domains.js";
import type { Clock } from "#daemon/clock.js";
import { compact } from "#daemon/consent-log/consent-log-messages.js";
import { createConsentLogReads } from "#daemon/consent-log/consent-log-reads.js";
import {
  authorizeOrigin,
  bannerSites,
  type ConsentLogBody,
  clampTimestamp,
  createLogIdGenerator,
  isExplicitChoice,
  LOG_BODY_LIMIT,
  LOG_IP_LIMIT,
  readConsentLogBody,
  reducePageUrl,
} from "#daemon/consent-log/consent-log-rules.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { PreferenceLinks } from "#daemon/consent-log/preference-links.js";
import { createPreferencesHandlers } from "#daemon/consent-log/preferences-handlers.js";
import { servicesOfMessage } from "#daemon/consent-log/service-names.js";
import {
  type ClientIpHasher,
  type FixedWindowLimiter,
  MINUTE_MS,
  rateLimited,
} from "#daemon/limits/rate-limiter.js";
import { bodyOf } from "#daemon/rpc/request-body.js";
import type { Store } from "#daemon/store/store.js";
import { appendConsentLog } from "#daemon/webhooks/outbox.js";
import {
  type ConsentLogService,
  type RecordConsentRequest,
  RecordConsentRequestSchema,
} from "#gen/consent/v1/consent_log_pb.js";

export interface ConsentLogServiceOptions {
  store: Store;
  authenticator: Authenticator;
  clock: Clock;
  /** The Authenticator's limiter: counters live in the store, shared by every daemon. */
  limiter: FixedWindowLimiter;
  /** Client IPs become counter names only as HMACs (decisions §2). */
  ipHasher: ClientIpHasher;
  /** CONSENT_BASE_URL: managePreferences links point at its /preferences/ page. */
  baseUrl: string;
  /**
   * The secrets of managePreferences tokens, the same on every daemon of the store: the first
   * signs and grants; a token signed under a later one (an older identity key, listed during a
   * rotation) is refused as a link made before the rotation, not as an altered one.
   */
  linkSecrets: readonly Buffer[];
}

/** The typed gRPC fields in the shape of the REST body, so both meet the same rules. */
function typedLogBody(request: RecordConsentRequest): unknown {
  const fields = toJson(RecordConsentRequestSchema, request) as Record<string, unknown>;
  delete fields.requestOrigin;
  // A category's services as the JSON body names them: the list itself, not a message.
  const services = servicesOfMessage(request.services);
  return {
    ...fields,
    preferences: { ...request.preferences },
    services: Object.keys(services).length > 0 ? services : undefined,
  };
}

/** The privacy-minimised row of one post (spec 2.5, decisions §5): no IP, no user agent. */
function logRecord(
  banner: BannerRecord,
  sites: readonly Site[],
  body: ConsentLogBody,
  referer: string,
  receivedAt: Date,
  id: string,
): ConsentLogRecord {
  const production = banner.production.configuration;
  return compact({
    id,
    teamId: banner.teamId,
    bannerId: banner.id,
    publicId: banner.publicId,
    consentId: (body.consentId ?? randomUUID()).toLowerCase(),
    method: body.method,
    preferences: { ...body.preferences },
    revision: body.revision,
    languageCode: body.languageCode,
    country: body.country,
    region: body.region,
    matchedRuleId: body.matchedRuleId,
    gpc: body.gpc,
    purposeChoices: body.purposeChoices && compact({ ...body.purposeChoices }),
    services: body.services && { ...body.services },
    pageUrl: reducePageUrl(body.pageUrl, referer, production.telemetryLevel, sites),
    ...clampTimestamp(body.timestamp, receivedAt),
    receivedAt,
  });
}

/**
 * The consent log (spec 2.5, 3.3, 4.4; decisions §5): the banner runtime's posts, the operator's
 * listing, and the preferences page behind managePreferences links.
 */
export function createConsentLogService(
  options: ConsentLogServiceOptions,
): ServiceImpl<typeof ConsentLogService> {
  const { store, authenticator, clock } = options;
  const links = new PreferenceLinks(options.linkSecrets);
  const logIds = createLogIdGenerator();
  /** When the store's newest id was last read (performance.now()). */
  let newestReadAt = Number.NEGATIVE_INFINITY;
  /**
   * A new row's id, above the store's newest as the store allows (newestIdEveryMs): another
   * daemon's rows, or this store's before a restart, were perhaps written by a clock ahead of
   * this one's, and ids sorting below them would be listed as older and missed by log tails.
   */
  async function nextLogId(receivedAt: Date): Promise<string> {
    const now = performance.now();
    if (now - newestReadAt >= store.consentLog.newestIdEveryMs) {
      newestReadAt = now;
      const newest = await store.consentLog.newestId();
      if (newest !== undefined) logIds.raise(newest);
    }
    return logIds.next(receivedAt);
  }
  const preferencesPage = `${options.baseUrl.replace(/\/+$/, "")}/preferences/`;
  // Wakes this daemon's tails at once; rows of other daemons reach them by polling.
  const appends = new EventEmitter().setMaxListeners(0);

  /**
   * spec 8: 1,000 calls a minute per client IP, counted before the body is even read. The log
   * route and the preferences page count apart: a network whose many visitors post choices (one
   * address behind a NAT) must not lock its visitors out of their preferences.
   */
  async function admitVisitor(ctx: HandlerContext, route: "consent-log" | "preferences") {
    const { clientIp } = await authenticator.refuseWrongGatewayToken(ctx);
    const bucket = `${route}-ip:${options.ipHasher.hash(clientIp)}`;
    const outcome = await options.limiter.hit(bucket, LOG_IP_LIMIT, MINUTE_MS);
    if (!outcome.allowed) throw rateLimited(outcome.retryAfterSeconds);
  }

  return {
    async recordConsent(request, ctx) {
      await admitVisitor(ctx, "consent-log");
      const body = readConsentLogBody(
        bodyOf(RecordConsentRequestSchema, request, typedLogBody, {
          maxBytes: LOG_BODY_LIMIT,
          failure: "subject",
        }),
      );
      const banner = await activeBanner(store.banners, body.bannerId);
      const { origin = "", referer = "" } = request.requestOrigin ?? {};
      const sites = bannerSites(banner);
      authorizeOrigin(sites, origin, referer);
      const receivedAt = clock();
      const id = await nextLogId(receivedAt);
      const record = logRecord(banner, sites, body, referer, receivedAt, id);
      // The port's promise: durable once append resolves, so the 200 follows a durable row.
      // With its consent.given event for an explicit choice, in the same atomic write (spec 6).
      await appendConsentLog(store, record);
      appends.emit("append");
      const managePreferences = isExplicitChoice(record.method)
        ? preferencesPage + links.sign(banner.publicId, record.consentId, receivedAt)
        : "";
      return { consentLogId: record.id, managePreferences };
    },

    ...createConsentLogReads({
      store,
      authenticator,
      clock,
      nextAppend: async (signal) => {
        await once(appends, "append", { signal });
      },
    }),

    ...createPreferencesHandlers({
      store,
      clock,
      links,
      nextLogId,
      admitVisitor: (ctx) => admitVisitor(ctx, "preferences"),
    }),
  };
}
