import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import type { Database } from "lmdb";
import {
  isExplicitChoice,
  isOptIn,
  lowestIdAt,
  matchesLogFilters,
} from "#daemon/consent-log/consent-log-rules.js";
import {
  CONSENT_ID_SCAN_LIMIT,
  type ConsentLogForwardQuery,
  type ConsentLogRecord,
  type ConsentLogStats,
  type ConsentLogStore,
  LogReadTooLargeError,
} from "#daemon/consent-log/consent-log-store.js";
import { PREFIX_END } from "#daemon/store/lmdb-keys.js";
import { DuplicateKeyError } from "#daemon/store/store.js";
import type { OutboxEntry } from "#daemon/webhooks/lmdb-webhook-store.js";

/** Key of a log row: `[teamId, id]`. Ids are UUIDv7, so a reverse scan of a team is newest first. */
type LogKey = [teamId: string, id: string];

/** Key of the consentId index: `[teamId, consentId, id]`, so a reverse scan finds the newest row. */
type ConsentIdKey = [teamId: string, consentId: string, id: string];

/** The named databases of the consent log. */
export interface LmdbConsentLogDatabases {
  consentLog: Database<ConsentLogRecord, LogKey>;
  /** id → teamId; enforces that ids are unique across teams. */
  consentLogTeamsById: Database<string, string>;
  /** `[teamId, consentId, id]` → nothing: the rows of one consent record, oldest first. */
  consentLogIdsByConsentId: Database<true, ConsentIdKey>;
  /** consentLogId → pending webhook event (the transactional outbox of the webhook store). */
  webhookOutbox: Database<OutboxEntry, string>;
}

/**
 * Rows a read passes over between turns of the event loop: a count over half a million rows
 * took 3 s, during which the process served nothing else. A range read keeps its snapshot (the
 * read transaction it began with) across the turns.
 */
const ROWS_BETWEEN_TURNS = 1_000;

/** How long one read of the log may run when the store is given no limit: MongoDB's default. */
export const DEFAULT_LOG_READ_LIMIT_MS = 10_000;

/**
 * The checkpoint of one read, every ROWS_BETWEEN_TURNS rows: a turn of the event loop, then the
 * read's time limit, so the clock is read once per thousand rows, never per row. A read still
 * running `limitMs` after it began stops with LogReadTooLargeError, as MongoDB stops one at its
 * maxTimeMS; a read of fewer rows than that is never stopped.
 */
function checkpoint(limitMs: number): () => Promise<void> {
  const startedAt = performance.now();
  return async () => {
    await yieldToEventLoop();
    if (performance.now() - startedAt >= limitMs) throw new LogReadTooLargeError(limitMs);
  };
}

/**
 * The lowest id a row received at `since` or later can have (lowestIdAt: an id is never below its
 * receipt's millisecond), or the lowest of all: a read from since starts at since's rows instead
 * of passing over the team's whole older history. `until` bounds no id (an id runs ahead of its
 * receipt by as far as its daemon's clock stepped back), so it is checked on each row.
 */
function firstIdFrom(since: Date | undefined): string {
  return since === undefined ? "" : lowestIdAt(since.getTime());
}

/** A range of one team's row ids: from `start` toward `end` (excluded), descending when `reverse`. */
interface IdRange {
  start: string | typeof PREFIX_END;
  end: string | typeof PREFIX_END;
  exclusiveStart: boolean;
  reverse: boolean;
}

/**
 * ConsentLogStore over LMDB. list() walks one team's rows backwards from `beforeId` and stops at
 * `limit`, so a page costs the rows it returns plus the rows its filters skip. list, listForward
 * and stats stop at `options.logReadLimitMs` (checkpoint; CONSENT_LOG_READ_TIMEOUT_MS, default
 * DEFAULT_LOG_READ_LIMIT_MS); latestByConsentId reads at most CONSENT_ID_SCAN_LIMIT rows.
 */
export function createLmdbConsentLogStore(
  dbs: LmdbConsentLogDatabases,
  options: { logReadLimitMs?: number } = {},
): ConsentLogStore {
  const { consentLog, consentLogTeamsById, consentLogIdsByConsentId } = dbs;
  const limitMs = options.logReadLimitMs ?? DEFAULT_LOG_READ_LIMIT_MS;

  /**
   * The team's rows whose ids lie in `range`, in its order: a range of the log itself, or, when
   * the query names a consentId, of the consentId index, so one consent record's rows are read
   * without passing over the rest of the team's log. Rows with an id in `skip` are passed over
   * undecoded (undefined), as is a row purged between its index entry and its read.
   */
  function rowsIn(
    query: { teamId: string; consentId?: string },
    range: IdRange,
    skip?: ReadonlySet<string>,
  ): Iterable<ConsentLogRecord | undefined> {
    const { teamId, consentId } = query;
    const read = (id: string) => (skip?.has(id) ? undefined : consentLog.get([teamId, id]));
    if (consentId !== undefined) {
      return consentLogIdsByConsentId
        .getKeys({
          ...range,
          start: [teamId, consentId, range.start],
          end: [teamId, consentId, range.end],
        })
        .map((key) => read(key[2]));
    }
    const keys = { ...range, start: [teamId, range.start], end: [teamId, range.end] };
    // Without ids to skip, the rows come with their keys in one walk.
    return skip && skip.size > 0
      ? consentLog.getKeys(keys).map((key) => read(key[1]))
      : consentLog.getRange(keys).map(({ value }) => value);
  }

  return {
    // A commit waits at most for the other processes' commits on the one write lock.
    lateRowsMs: 5_000,
    // The last key of the id index: a look-up in the memory map.
    newestIdEveryMs: 0,
    async newestId() {
      for (const id of consentLogTeamsById.getKeys({ reverse: true, limit: 1 })) return id;
      return undefined;
    },
    // Port: durable once the promise resolves (the environment syncs every commit). The outbox
    // entry is written in the same transaction as the row: both commit or neither does.
    async append(record, options = {}) {
      // One conditional write block, run whole on lmdb's write thread (no JavaScript inside the
      // write transaction, so no process holds the write lock while its event loop is busy):
      // the row, its indexes and its outbox entry are written only if the id is new.
      const written = await consentLogTeamsById.ifNoExists(record.id, () => {
        consentLogTeamsById.put(record.id, record.teamId);
        consentLogIdsByConsentId.put([record.teamId, record.consentId, record.id], true);
        consentLog.put([record.teamId, record.id], record);
        if (options.event) {
          dbs.webhookOutbox.put(record.id, {
            teamId: record.teamId,
            dueAtMs: record.receivedAt.getTime(),
          });
        }
      });
      if (!written) throw new DuplicateKeyError("consent log id");
    },
    // The consentId index has no banner in its key, and data dirs written before the banner
    // mattered hold only this index: so the consentId's rows are read newest first and the first
    // of the banner is the answer. At most CONSENT_ID_SCAN_LIMIT of them (the port's bound): rows
    // of other banners with the same consentId are rare, and a flood of them must not make every
    // page load read them all. Beyond the bound the answer is null, never another banner's row.
    async latestByConsentId(teamId, bannerId, consentId) {
      const newest = consentLogIdsByConsentId.getKeys({
        start: [teamId, consentId, PREFIX_END],
        end: [teamId, consentId],
        reverse: true,
        limit: CONSENT_ID_SCAN_LIMIT,
      });
      for (const key of newest) {
        const row = consentLog.get([teamId, key[2]]);
        if (row?.bannerId === bannerId) return row;
      }
      return null;
    },
    async list(query) {
      const rows: ConsentLogRecord[] = [];
      if (query.limit <= 0) return rows;
      const values = rowsIn(query, {
        start: query.beforeId ?? PREFIX_END,
        exclusiveStart: query.beforeId !== undefined,
        end: firstIdFrom(query.since),
        reverse: true,
      });
      const turn = checkpoint(limitMs);
      let read = 0;
      for (const value of values) {
        if (value && matchesLogFilters(value, query)) rows.push(value);
        if (rows.length >= query.limit) break;
        if (++read % ROWS_BETWEEN_TURNS === 0) await turn();
      }
      return rows;
    },
    async listForward(query: ConsentLogForwardQuery) {
      const rows: ConsentLogRecord[] = [];
      if (query.limit <= 0) return rows;
      const fromSince = firstIdFrom(query.since);
      const afterId =
        query.afterId !== undefined && query.afterId >= fromSince ? query.afterId : undefined;
      // With ids to skip, keys alone are walked, so a skipped row is never decoded; the others
      // are read one by one (a row purged in between is gone, as if the scan had begun later).
      // A skipped key is passed over all the same, and counts towards the checkpoint.
      const values = rowsIn(
        query,
        {
          start: afterId ?? fromSince,
          exclusiveStart: afterId !== undefined,
          end: PREFIX_END,
          reverse: false,
        },
        query.skipIds,
      );
      const turn = checkpoint(limitMs);
      let read = 0;
      for (const value of values) {
        if (value && matchesLogFilters(value, query)) rows.push(value);
        if (rows.length >= query.limit) break;
        if (++read % ROWS_BETWEEN_TURNS === 0) await turn();
      }
      return rows;
    },
    // One ascending range scan of the team's rows (or the consent record's) from since's ids on.
    async stats(query) {
      const stats: ConsentLogStats = {
        total: 0,
        byMethod: {},
        byDay: [],
        explicitChoices: 0,
        optedIn: 0,
      };
      const days = new Map<string, number>();
      const values = rowsIn(query, {
        start: firstIdFrom(query.since),
        exclusiveStart: false,
        end: PREFIX_END,
        reverse: false,
      });
      const turn = checkpoint(limitMs);
      let read = 0;
      for (const value of values) {
        if (++read % ROWS_BETWEEN_TURNS === 0) await turn();
        if (!value || !matchesLogFilters(value, query)) continue;
        stats.total += 1;
        stats.byMethod[value.method] = (stats.byMethod[value.method] ?? 0) + 1;
        const day = value.receivedAt.toISOString().slice(0, 10);
        days.set(day, (days.get(day) ?? 0) + 1);
        if (!isExplicitChoice(value.method)) continue;
        stats.explicitChoices += 1;
        if (isOptIn(value.preferences, query.requiredCategories[value.publicId] ?? [])) {
          stats.optedIn += 1;
        }
      }
      // Ids ascend with receipt time, but a clock step back can reorder days: sort to be sure.
      stats.byDay = [...days]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([day, count]) => ({ day, count }));
      return stats;
    },
  };
}
