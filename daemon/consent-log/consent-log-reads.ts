import { setTimeout as sleep } from "node:timers/promises";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Authenticator } from "#daemon/auth/authenticator.js";
import type { BannerRecord } from "#daemon/banners/banner-store.js";
import type { Clock } from "#daemon/clock.js";
import { consentLogEntryMessage } from "#daemon/consent-log/consent-log-messages.js";
import {
  idMillis,
  lowestIdAt,
  matchesLogFilters,
  readTeamLogQuery,
} from "#daemon/consent-log/consent-log-rules.js";
import {
  type ConsentLogForwardQuery,
  type ConsentLogQuery,
  type ConsentLogRecord,
  LogReadTooLargeError,
} from "#daemon/consent-log/consent-log-store.js";
import { DomainError, TAIL_READ_STOPPED_MESSAGE } from "#daemon/errors.js";
import { InFlightCounts } from "#daemon/limits/in-flight-counts.js";
import { afterAdmission } from "#daemon/rpc/rate-limit-headers.js";
import type { ReadCancellation, Store } from "#daemon/store/store.js";
import type { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";

/** Rows per store read and per streamed message of an export or a tail. */
export const LOG_STREAM_BATCH = 500;
/**
 * How often a tail sweeps its lookback window (the store's lateRowsMs) for rows committed late,
 * and so at the latest how often it meets rows another daemon appended.
 */
export const TAIL_POLL_MS = 500;
/**
 * How far back most sweeps read: rows commonly come late by far less (another daemon's, or a
 * concurrent append's). A store whose rows may come later than this (MongoDB, whose
 * acknowledgement may wait out a stalled primary) has its whole lookback read every
 * TAIL_FULL_SWEEP_MS, so a sweep's cost stays that of this window, not of the store's lookback.
 */
export const TAIL_NEAR_MS = 5_000;
/** How often a sweep reads a store's whole lookback when it reaches past TAIL_NEAR_MS. */
export const TAIL_FULL_SWEEP_MS = 5_000;
/**
 * The least time between two reads of one tail. This daemon's appends wake a tail, and between
 * sweeps a wake-up reads only the rows after the last one sent; at a high rate of appends each
 * read still costs a store read and a key check, so wake-ups this close together are taken as one.
 */
export const TAIL_COALESCE_MS = 50;
/**
 * The farthest back a tail re-reads, whatever the store's lateRowsMs: a full sweep reads every id
 * of its lookback and the tail keeps them all, so the lookback is what each sweep costs. MongoDB
 * declares rows as late as a command's longest wait (mongo-timeouts.ts, about 40 minutes at the
 * highest CONSENT_MONGODB_TIMEOUT_MS); past this bound a row acknowledged that late reaches the
 * log's list and export but may miss a running tail.
 */
export const TAIL_MAX_LOOKBACK_MS = 120_000;
/** A tail with nothing to send sends an empty message this often, so idle connections stay up. */
export const TAIL_KEEPALIVE_MS = 20_000;
/** Tails of one team one daemon follows at once; one more is refused (RESOURCE_EXHAUSTED). */
export const MAX_TAILS_PER_TEAM = 16;
/**
 * Exports of one team one daemon runs at once; one more is refused (RESOURCE_EXHAUSTED). Each
 * reads the team's whole log (or its range), and the daemon's other calls, other teams' too,
 * wait their turns behind every batch it reads: a team's exports are bounded as its tails are.
 */
export const MAX_EXPORTS_PER_TEAM = 4;
/**
 * Counts (ConsentLogStats) and filtered listings (ListConsentLogs with a filter checked on each row
 * read: scansLog) of one team one daemon runs at once; one more is refused (RESOURCE_EXHAUSTED).
 * Each can pass over the team's whole log until the store stops it at its time limit, and other
 * teams' calls wait their turns behind every thousand rows it reads, as behind an export's.
 */
export const MAX_SCANS_PER_TEAM = 4;
/** What a refused tail, export or scan, or a tail whose read the store stopped, is told to wait. */
const STREAM_RETRY_SECONDS = 5;

/**
 * Counts one more stream of `teamId` in `open`, unless the team has `max` there already: the call
 * is then refused as rate_limited with `refusal`, to retry after STREAM_RETRY_SECONDS. The caller
 * gives the stream back (open.leave) however it ends.
 */
function enterWithin(open: InFlightCounts, teamId: string, max: number, refusal: string): void {
  if (open.of(teamId) >= max) {
    throw new DomainError("rate_limited", "rate_limited", refusal, {
      retryAfterSeconds: STREAM_RETRY_SECONDS,
    });
  }
  open.enter(teamId);
}

export interface ConsentLogReadOptions {
  store: Store;
  authenticator: Authenticator;
  clock: Clock;
  /** Resolves when this daemon appends a row, so a tail can wake before its next poll. */
  nextAppend(signal: AbortSignal): Promise<void>;
}

type ConsentLogReads = Pick<
  ServiceImpl<typeof ConsentLogService>,
  "listConsentLogs" | "tailConsentLogs" | "consentLogStats" | "exportConsentLogs"
>;

interface LogFilterRequest {
  bannerId: string;
  methods: string[];
  since?: Timestamp;
  until?: Timestamp;
  consentId: string;
}

/**
 * Whether a listing can pass over much of the team's log for few rows: a filter checked on each
 * row read (until, methods, and a banner on the embedded store) leaves out rows it has read, where
 * a page by cursor, from `since` or of one consentId (whose index the read walks) reads about the
 * rows it returns.
 */
function scansLog(query: Pick<ConsentLogQuery, "until" | "methods" | "publicId">): boolean {
  return query.until !== undefined || query.methods !== undefined || query.publicId !== undefined;
}

/**
 * The operator's reads of the consent log: a page of the listing, a live tail, counts, and an
 * export for proof of consent. Same credentials as ListConsentLogs (operator token with
 * consent-team, or a key with logs:read); the team always comes from the credential.
 */
export function createConsentLogReads(options: ConsentLogReadOptions): ConsentLogReads {
  const { store, authenticator, clock } = options;

  /** Authorizes as ListConsentLogs does and reads the shared filters. */
  async function admit(ctx: HandlerContext, request: LogFilterRequest) {
    const auth = await authenticator.authorize(ctx, { scope: "logs:read", write: false });
    return afterAdmission(ctx, auth, async () => {
      const { query, banner } = await readTeamLogQuery(store.banners, auth.team.id, request);
      const { publicId, methods, consentId, since, until } = query;
      const filters = { teamId: auth.team.id, publicId, methods, consentId, since, until };
      // The banner the filter names, read by the team check (consentLogStats needs it).
      return { auth, banner, filters };
    });
  }

  /** Every row of the query after `afterId`, oldest first, one store page at a time. */
  async function* forward(query: Omit<ConsentLogForwardQuery, "limit">) {
    let afterId = query.afterId;
    for (;;) {
      const rows = await store.consentLog.listForward({
        ...query,
        afterId,
        limit: LOG_STREAM_BATCH,
      });
      if (rows.length > 0) yield rows;
      if (rows.length < LOG_STREAM_BATCH) return;
      afterId = rows.at(-1)?.id;
    }
  }

  /**
   * publicId → required category names of each of the team's banners, or of the one the filter
   * names (admit has read it: none when the filter names no banner of the team).
   */
  async function requiredCategories(
    teamId: string,
    publicId: string | undefined,
    banner: BannerRecord | undefined,
    cancel: ReadCancellation,
  ) {
    const banners = publicId ? [banner] : await store.banners.listByTeam(teamId, cancel);
    return Object.fromEntries(
      banners.flatMap((banner) =>
        banner
          ? [
              [
                banner.publicId,
                banner.production.configuration.categories
                  .filter((category) => category.required)
                  .map((category) => category.name),
              ],
            ]
          : [],
      ),
    );
  }

  /** Tails this daemon follows, by team. */
  const tailsByTeam = new InFlightCounts();
  /** Exports this daemon runs, by team. */
  const exportsByTeam = new InFlightCounts();
  /** Counts and filtered listings this daemon runs, by team. */
  const scansByTeam = new InFlightCounts();

  /** Runs `read`, a read that can pass over much of the team's log, within MAX_SCANS_PER_TEAM. */
  async function scan<T>(teamId: string, read: () => Promise<T>): Promise<T> {
    enterWithin(
      scansByTeam,
      teamId,
      MAX_SCANS_PER_TEAM,
      `The team already runs ${MAX_SCANS_PER_TEAM} counts or filtered listings of its consent log on this daemon; wait for one to end and retry`,
    );
    try {
      return await read();
    } finally {
      scansByTeam.leave(teamId);
    }
  }

  return {
    async listConsentLogs(request, ctx) {
      const auth = await authenticator.authorize(ctx, { scope: "logs:read", write: false });
      return afterAdmission(ctx, auth, async () => {
        const { query } = await readTeamLogQuery(store.banners, auth.team.id, request);
        // One row more than the page tells whether another page follows.
        const read = () =>
          store.consentLog.list({
            ...query,
            teamId: auth.team.id,
            limit: query.limit + 1,
            cancel: ctx,
          });
        const rows = scansLog(query) ? await scan(auth.team.id, read) : await read();
        const page = rows.slice(0, query.limit);
        const more = rows.length > query.limit;
        return {
          entries: page.map(consentLogEntryMessage),
          nextPageToken: more ? (page.at(-1)?.id ?? "") : "",
        };
      });
    },

    async *tailConsentLogs(request, ctx) {
      // A tail starts now and has no end: since and until do not apply to it.
      const {
        auth,
        filters: { since: _since, until: _until, teamId, ...tailFilters },
      } = await admit(ctx, request);
      // Every tail reads the log on each append and sweeps it twice a second: a team's tails on
      // one daemon are bounded.
      enterWithin(
        tailsByTeam,
        teamId,
        MAX_TAILS_PER_TEAM,
        `The team already follows its consent log in ${MAX_TAILS_PER_TEAM} tails on this daemon; end one and retry`,
      );
      try {
        // The tail reads all of the team's rows and applies its filters itself, so its cursor
        // and the ids it has met cover every row, whatever the filters let through: a read
        // costs the team's new rows, however rarely they match.
        /** Ids of the lookback window met already (sent, or filtered out). */
        const met = new Set<string>();
        // How far behind the newest row a sweep re-reads. Ids are UUIDv7 of each daemon's clock:
        // a row another daemon (or a concurrent append of this one) commits late can carry an
        // id below one already sent, so the sweep reads a trailing window and skips the ids it
        // has met; the store says how late a row can be, and the tail reads at most
        // TAIL_MAX_LOOKBACK_MS of it.
        const lookbackMs = Math.min(store.consentLog.lateRowsMs, TAIL_MAX_LOOKBACK_MS);
        let windowStart = clock().getTime() - lookbackMs;
        /** The highest id met: between sweeps a read starts after it. */
        let cursor = lowestIdAt(windowStart);
        // Rows stored before the tail began are not part of it.
        for await (const rows of forward({ teamId, afterId: cursor, cancel: ctx })) {
          for (const row of rows) met.add(row.id);
          cursor = rows.at(-1)?.id ?? cursor;
        }
        // The first message, empty, tells the caller the tail is following from here on.
        yield { entries: [] };
        let lastMessage = clock().getTime();
        // Sweeps are paced by elapsed time, not by the (possibly injected) clock of the ids.
        let lastSweep = performance.now();
        let lastFullSweep = lastSweep;
        while (!ctx.signal.aborted) {
          const readAt = clock().getTime();
          const startedAt = performance.now();
          // A sweep re-reads the last TAIL_NEAR_MS for late rows, and a full one the whole
          // lookback, the store passing over the ids met without reading their rows; a wake-up
          // between sweeps reads only what follows the cursor, so a read costs the new rows,
          // not the window.
          const sweep = startedAt - lastSweep >= TAIL_POLL_MS;
          const full =
            sweep &&
            (lookbackMs <= TAIL_NEAR_MS || startedAt - lastFullSweep >= TAIL_FULL_SWEEP_MS);
          const sweepStart = full ? windowStart : Math.max(windowStart, readAt - TAIL_NEAR_MS);
          const from = sweep
            ? { afterId: lowestIdAt(sweepStart), skipIds: met }
            : { afterId: cursor };
          const fresh: ConsentLogRecord[] = [];
          for await (const rows of forward({ teamId, ...from, cancel: ctx })) {
            for (const row of rows) {
              if (row.id > cursor) cursor = row.id;
              if (met.has(row.id)) continue;
              met.add(row.id);
              if (matchesLogFilters(row, tailFilters)) fresh.push(row);
            }
          }
          if (fresh.length > 0 || readAt - lastMessage >= TAIL_KEEPALIVE_MS) {
            // A key revoked or expired while the tail runs ends it before it sends another row.
            await authenticator.confirmStillAdmitted(auth);
            yield { entries: fresh.map(consentLogEntryMessage) };
            lastMessage = readAt;
          }
          if (sweep) lastSweep = startedAt;
          if (full) {
            // The next full sweep starts a lookback before this one began, so a late row is
            // still met; ids that fell out of the window cannot come back and are forgotten.
            lastFullSweep = startedAt;
            windowStart = Math.max(windowStart, readAt - lookbackMs);
            for (const id of met) if (idMillis(id) < windowStart) met.delete(id);
          }
          await wake(ctx.signal, TAIL_POLL_MS - (performance.now() - lastSweep));
          const since = performance.now() - startedAt;
          if (since < TAIL_COALESCE_MS) {
            await sleep(TAIL_COALESCE_MS - since, undefined, { signal: ctx.signal }).catch(
              () => undefined,
            );
          }
        }
        // A deadline, the daemon shutting down or the caller leaving: the tail ends with that
        // reason (DEADLINE_EXCEEDED, UNAVAILABLE), never as if it had finished.
        ctx.signal.throwIfAborted();
      } catch (error) {
        // A tail reads its lookback and the rows after it, no range of the caller's: one such
        // read the store stopped at its time limit met a store too busy for now (spec 7: retry).
        if (!(error instanceof LogReadTooLargeError)) throw error;
        throw new DomainError("unavailable", "unavailable", TAIL_READ_STOPPED_MESSAGE, {
          retryAfterSeconds: STREAM_RETRY_SECONDS,
        });
      } finally {
        tailsByTeam.leave(teamId);
      }
    },

    async consentLogStats(request, ctx) {
      const { banner, filters } = await admit(ctx, request);
      // A count reads every row of its range, whatever its filters.
      const stats = await scan(filters.teamId, async () =>
        store.consentLog.stats({
          ...filters,
          requiredCategories: await requiredCategories(
            filters.teamId,
            filters.publicId,
            banner,
            ctx,
          ),
          cancel: ctx,
        }),
      );
      return {
        total: BigInt(stats.total),
        byMethod: Object.fromEntries(
          Object.entries(stats.byMethod).map(([method, count]) => [method, BigInt(count)]),
        ),
        byDay: stats.byDay.map(({ day, count }) => ({ day, count: BigInt(count) })),
        explicitChoices: BigInt(stats.explicitChoices),
        optedIn: BigInt(stats.optedIn),
        optInRate: stats.explicitChoices === 0 ? 0 : stats.optedIn / stats.explicitChoices,
      };
    },

    async *exportConsentLogs(request, ctx) {
      const { auth, filters } = await admit(ctx, request);
      const { teamId } = filters;
      enterWithin(
        exportsByTeam,
        teamId,
        MAX_EXPORTS_PER_TEAM,
        `The team already runs ${MAX_EXPORTS_PER_TEAM} exports of its consent log on this daemon; wait for one to end and retry`,
      );
      try {
        // Without an end the export stops at the moment it began: one fixed set of rows. Where
        // the team's newest row has an id past that moment (received before the clock was set
        // back; an id is never below its receipt), it stops past that row, so no row stored is
        // left out.
        let until = filters.until;
        if (until === undefined) {
          const now = clock();
          const [newest] = await store.consentLog.list({ teamId, limit: 1, cancel: ctx });
          const newestMs = newest ? idMillis(newest.id) : Number.NEGATIVE_INFINITY;
          until = newestMs >= now.getTime() ? new Date(newestMs + 1) : now;
        }
        for await (const rows of forward({ ...filters, until, cancel: ctx })) {
          // Cut short by a deadline or a shutdown, an export ends with that reason, never as if
          // it had given every row.
          ctx.signal.throwIfAborted();
          await authenticator.confirmStillAdmitted(auth);
          yield { entries: rows.map(consentLogEntryMessage) };
        }
      } finally {
        exportsByTeam.leave(teamId);
      }
    },
  };

  /** Waits `ms` (the next sweep), an append by this daemon, or the caller's cancellation. */
  async function wake(signal: AbortSignal, ms: number): Promise<void> {
    const done = new AbortController();
    const both = AbortSignal.any([signal, done.signal]);
    await Promise.race([
      sleep(Math.max(0, ms), undefined, { signal: both }).catch(() => undefined),
      options.nextAppend(both).catch(() => undefined),
    ]);
    done.abort();
  }
}
