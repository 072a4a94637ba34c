import { randomUUID } from "node:crypto";
import { setTimeout } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { Authenticator, Authorized } from "#daemon/auth/authenticator.js";
import { kAnswerSent } from "#daemon/auth/caller.js";
import { activeBanner } from "#daemon/banners/active-banner.js";
import {
  applyConfiguration,
  type ConfigurationInput,
  defaultConfiguration,
} from "#daemon/banners/banner-configuration.js";
import { bannerMessage, publishedBannerMessage } from "#daemon/banners/banner-messages.js";
import {
  checkCategoryTexts,
  checkConfigurationSize,
  MAX_BANNERS_PER_TEAM,
  readBannerCreation,
  readBannerUpdate,
} from "#daemon/banners/banner-rules.js";
import {
  BANNER_BODY_LIMIT,
  type BannerConfiguration,
  type BannerRecord,
} from "#daemon/banners/banner-store.js";
import type { Clock } from "#daemon/clock.js";
import { DomainError, insertWithinMaximum, notFound } from "#daemon/errors.js";
import { oneAtATimePerKey } from "#daemon/one-at-a-time.js";
import { admission } from "#daemon/rpc/rate-limit-headers.js";
import { bodyOf } from "#daemon/rpc/request-body.js";
import type { ReadCancellation, Store } from "#daemon/store/store.js";
import { MAX_REVISION } from "#daemon/validation/rules.js";
import {
  type BannerService,
  CreateBannerRequestSchema,
  UpdateBannerRequestSchema,
} from "#gen/consent/v1/banner_pb.js";

export interface BannerServiceOptions {
  store: Store;
  authenticator: Authenticator;
  clock: Clock;
  /** CONSENT_BASE_URL: where visitors reach the loader (Banner.loader_url). */
  baseUrl: string;
  /** Called after a publish or any change the public side sees, so caches can refresh. */
  onPublicChange?: (publicId: string) => void;
}

const bodyLimit = { maxBytes: BANNER_BODY_LIMIT, failure: "banner" } as const;
/** Read-modify-write attempts before a concurrent-update failure is reported. */
const REPLACE_ATTEMPTS = 10;
/** After lost attempt n, a random wait of up to RETRY_BASE_MS × 2^n (full jitter). */
const RETRY_BASE_MS = 2;

/**
 * `base` with a body's configuration fields applied (decisions §3: a creation's over the
 * defaults, a PATCH's over the draft), its category texts checked against the result.
 */
function configured(base: BannerConfiguration, input: ConfigurationInput): BannerConfiguration {
  const next = applyConfiguration(base, input);
  checkCategoryTexts(next, input, base.texts);
  checkConfigurationSize(next);
  return next;
}

/** A team whose list holds this many banners has its lists read one at a time (listOfTeam). */
const QUEUED_LIST_SIZE = 50;

/** Teams remembered as having short lists; past this many the memory starts again. */
const SHORT_LIST_TEAMS_MAX = 10_000;

/** How long a team's next list waits at most for the answer of the one before to leave. */
const ANSWER_SENT_WAIT_MS = 30_000;

/** The banner endpoints (spec 4.2-4.3, decisions §3). */
export function createBannerService(
  options: BannerServiceOptions,
): ServiceImpl<typeof BannerService> {
  const { store, authenticator, clock } = options;
  const asMessage = (record: BannerRecord) => bannerMessage(record, options.baseUrl);

  const admitted = admission(
    authenticator,
    { read: "banners:read", write: "banners:write" },
    { session: true },
  );

  /**
   * A banner id is a UUID, read in either case as its public id is. The public id of one of the
   * team's own banners, given instead (both are UUIDs, and the loader's and the subject
   * endpoints' bannerId is the public one), is named as such in the 404; another team's is not.
   */
  async function ownBanner(auth: Authorized, id: string): Promise<BannerRecord> {
    const banner = await store.banners.get(auth.team.id, id.toLowerCase());
    if (banner) return banner;
    const byPublicId = await store.banners.getByPublicId(id.toLowerCase());
    if (byPublicId?.teamId === auth.team.id) {
      throw notFound(
        `No banner with that id on this team: ${byPublicId.publicId} is the public id of banner "${byPublicId.name}", whose id is ${byPublicId.id}`,
      );
    }
    throw notFound("No banner with that id on this team");
  }

  /**
   * Edits of one banner in this process, one after another: they never race each other, and
   * the optimistic retry below is left to races with other processes on the same store.
   */
  const editOfBanner = oneAtATimePerKey();
  /**
   * Lists of a team with many banners in this process, one after another. A list holds every
   * banner of the team at once (spec 4.2 has no pages), up to MAX_BANNERS_PER_TEAM of 256 KB:
   * lists sent together would multiply that, so each waits until the answer of the team's list
   * before it has left (kAnswerSent): through a stand-alone gateway, whose one connection carries
   * every team's calls, eight 53 MB answers at once filled the connection's session memory and
   * other teams' calls were refused. A team whose last list held fewer than QUEUED_LIST_SIZE
   * banners is not queued (the queue cost a benchmark of one-banner lists 30% of its
   * throughput); a team not known yet is. Other teams' lists are never held.
   */
  const listOfTeam = oneAtATimePerKey();
  const teamsWithShortLists = new Set<string>();

  async function readList(teamId: string, cancel: ReadCancellation) {
    const banners = await store.banners.listByTeam(teamId, cancel);
    if (banners.length >= QUEUED_LIST_SIZE) teamsWithShortLists.delete(teamId);
    else {
      if (teamsWithShortLists.size >= SHORT_LIST_TEAMS_MAX) teamsWithShortLists.clear();
      teamsWithShortLists.add(teamId);
    }
    return { banners: banners.map(asMessage) };
  }

  /**
   * The team's list, read once its lists before have been answered (listOfTeam). A call aborted
   * while it waits its turn ends at once, as its abort says: the caller gone (CANCELED), its
   * deadline passed (DEADLINE_EXCEEDED) or the daemon shutting down (UNAVAILABLE,
   * daemon/server.ts), which a REST client still waiting is answered 503 for (spec 7), not the
   * 500 of a call cancelled without cause; its turn, when it comes, reads nothing.
   */
  function queuedList(teamId: string, ctx: HandlerContext) {
    return new Promise<Awaited<ReturnType<typeof readList>>>((resolve, reject) => {
      const aborted = () => {
        const reason: unknown = ctx.signal.reason;
        reject(
          reason instanceof ConnectError
            ? reason
            : new ConnectError("the caller has left", Code.Canceled),
        );
      };
      ctx.signal.addEventListener("abort", aborted, { once: true });
      void listOfTeam(teamId, async () => {
        ctx.signal.removeEventListener("abort", aborted);
        if (ctx.signal.aborted) return aborted();
        try {
          resolve(await readList(teamId, ctx));
        } catch (error) {
          reject(error);
          return;
        }
        // A caller that reads no answer holds its team's next list this long at most.
        const waited = new AbortController();
        await Promise.race([
          ctx.values.get(kAnswerSent)(),
          setTimeout(ANSWER_SENT_WAIT_MS, undefined, { signal: waited.signal, ref: false }),
        ]).catch(() => {});
        waited.abort();
      });
    });
  }

  /** Optimistic read-modify-write: retried when a writer in another process got in between. */
  function modify(
    auth: Authorized,
    id: string,
    change: (banner: BannerRecord, now: Date) => BannerRecord,
  ): Promise<BannerRecord> {
    return editOfBanner(id.toLowerCase(), async () => {
      for (let attempt = 1; attempt <= REPLACE_ATTEMPTS; attempt++) {
        const current = await ownBanner(auth, id);
        const now = clock();
        const changed = change(current, now);
        // A PATCH that changes nothing writes nothing: updatedAt keeps telling the last change.
        if (isDeepStrictEqual(changed, current)) return current;
        const next = { ...changed, updatedAt: now, version: current.version + 1 };
        if (await store.banners.replace(next, current.version)) {
          options.onPublicChange?.(next.publicId);
          return next;
        }
        // Processes that lost together would collide again at once: each waits a random while,
        // growing with the attempt, so the next round is spread out (about 2 s in all at most).
        if (attempt < REPLACE_ATTEMPTS)
          await setTimeout(Math.random() * RETRY_BASE_MS * 2 ** attempt);
      }
      throw new DomainError(
        "conflict",
        "conflict",
        "The banner is being changed concurrently; retry the request",
      );
    });
  }

  return {
    listBanners: (_request, ctx) =>
      admitted(ctx, false, (auth) => {
        const teamId = auth.team.id;
        if (teamsWithShortLists.has(teamId)) return readList(teamId, ctx);
        return queuedList(teamId, ctx);
      }),

    getBanner: (request, ctx) =>
      admitted(ctx, false, async (auth) => ({
        banner: asMessage(await ownBanner(auth, request.id)),
      })),

    createBanner: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const input = readBannerCreation(
          bodyOf(
            CreateBannerRequestSchema,
            request,
            (r) => toJson(CreateBannerRequestSchema, r),
            bodyLimit,
          ),
        );
        const now = clock();
        const configuration = configured(defaultConfiguration(), input.configuration);
        const banner: BannerRecord = {
          id: randomUUID(),
          publicId: randomUUID(),
          teamId: auth.team.id,
          name: input.name,
          domain: input.domain,
          isActive: true,
          compliance: input.compliance,
          draft: configuration,
          // decisions §3: creation publishes the initial configuration as revision 1.
          production: {
            revision: 1,
            configuration: structuredClone(configuration),
            publishedAt: now,
          },
          createdAt: now,
          updatedAt: now,
          version: 1,
        };
        // spec 4 has no way to delete a banner: the refusal tells what to do instead.
        await insertWithinMaximum(() => store.banners.insert(banner, MAX_BANNERS_PER_TEAM), {
          records: "Banners",
          atMaximum: `This team has ${MAX_BANNERS_PER_TEAM} banners, the most it may have, and banners cannot be deleted; instead, reuse a banner the team no longer needs (an update changes its name, domain and configuration), or serve more sites with one banner by listing them in its configuration's additionalDomains`,
        });
        return { banner: asMessage(banner) };
      }),

    updateBanner: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const update = readBannerUpdate(
          bodyOf(
            UpdateBannerRequestSchema,
            request,
            (r) => {
              const { id: _id, ...fields } = toJson(UpdateBannerRequestSchema, r) as Record<
                string,
                unknown
              >;
              return fields;
            },
            bodyLimit,
          ),
        );
        const banner = await modify(auth, request.id, (current) => ({
          ...current,
          name: update.name ?? current.name,
          domain: update.domain ?? current.domain,
          isActive: update.isActive ?? current.isActive,
          compliance: {
            gdpr: update.compliance.gdpr ?? current.compliance.gdpr,
            ccpa: update.compliance.ccpa ?? current.compliance.ccpa,
            lgpd: update.compliance.lgpd ?? current.compliance.lgpd,
          },
          draft: update.configuration
            ? configured(current.draft, update.configuration)
            : current.draft,
        }));
        return { banner: asMessage(banner) };
      }),

    publishBanner: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const banner = await modify(auth, request.id, (current, now) => {
          // spec 2.4 and 8: a consent state names a revision of at most MAX_REVISION; one beyond
          // it would have every visitor's choice refused by the log route and the subject
          // endpoints, and the runtime ask again on every page.
          if (current.production.revision >= MAX_REVISION) {
            throw new DomainError(
              "failed_precondition",
              "failed_precondition",
              `This banner is at revision ${MAX_REVISION}, the highest a consent state may name, and cannot be published again; create a new banner for further changes`,
            );
          }
          return {
            ...current,
            production: {
              revision: current.production.revision + 1,
              configuration: structuredClone(current.draft),
              publishedAt: now,
            },
          };
        });
        return { banner: asMessage(banner) };
      }),

    getPublishedBanner: async (request) => ({
      banner: publishedBannerMessage(await activeBanner(store.banners, request.publicId)),
    }),
  };
}
