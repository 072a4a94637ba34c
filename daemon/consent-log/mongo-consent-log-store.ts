import {
  type Abortable,
  type Collection,
  type Document,
  type Filter,
  type IndexDescription,
  MongoServerError,
  type WithId,
} from "mongodb";
import { lowestIdAt } from "#daemon/consent-log/consent-log-rules.js";
import {
  type AppendOptions,
  CONSENT_ID_SCAN_LIMIT,
  type ConsentLogForwardQuery,
  type ConsentLogQuery,
  type ConsentLogRecord,
  type ConsentLogStats,
  type ConsentLogStatsQuery,
  type ConsentLogStore,
  LogReadTooLargeError,
} from "#daemon/consent-log/consent-log-store.js";
import { cancellableRead } from "#daemon/store/mongo-cancellation.js";
import { insertUnique } from "#daemon/store/mongo-writes.js";

/**
 * A consent log row as stored in MongoDB. `_id` is the consentLogId, a UUIDv7: its string order is
 * its time order, so `_id` alone gives newest-first listings and keyset pages (beforeId).
 * Optional fields are left out rather than stored as null.
 */
export type ConsentLogDocument = Omit<ConsentLogRecord, "id"> & {
  _id: string;
  /**
   * The row's pending webhook event (the transactional outbox), present until the webhook store
   * fans it out. Embedded in the row's own document, so one single-document insert writes both:
   * atomic without a multi-document transaction.
   */
  outbox?: OutboxField;
};

/** MongoDB's MaxTimeMSExpired: the server stopped a read at its maxTimeMS. */
const MAX_TIME_MS_EXPIRED = 50;

/** A pending `consent.given` event, claimed under a lease (daemon/webhooks/mongo-webhook-store.ts). */
export interface OutboxField {
  type: "consent.given";
  /** When the event may next be claimed: the append, then the end of each lease. */
  dueAt: Date;
  leaseOwner?: string;
}

/** The index of rows with a pending event by due time, which webhook claims read (hinted by name). */
export const OUTBOX_INDEX = { key: { "outbox.dueAt": 1 }, name: "consent_log_outbox" } as const;

/** ConsentLogStore over the `consent_log` collection (append-only). */
export class MongoConsentLogStore implements ConsentLogStore {
  /**
   * One index per read shape: a team's rows, a team's rows of one banner, and the rows of one
   * consent record (latestByConsentId, which picks its banner's among them, and the reads of an
   * operator's consentId filter), each newest first.
   */
  static readonly indexes: IndexDescription[] = [
    { key: { teamId: 1, _id: -1 }, name: "consent_log_by_team" },
    { key: { teamId: 1, publicId: 1, _id: -1 }, name: "consent_log_by_banner" },
    { key: { teamId: 1, consentId: 1, _id: -1 }, name: "consent_log_by_consent_id" },
    // Only rows with a pending event are indexed, so the outbox scan stays as small as the outbox.
    { ...OUTBOX_INDEX, partialFilterExpression: { outbox: { $exists: true } } },
  ];

  readonly lateRowsMs: number;
  /**
   * A round trip to the primary: read once a second, not per append. Ids another daemon takes in
   * between may sort below this one's for that second, which a tail's lookback covers.
   */
  readonly newestIdEveryMs = 1_000;
  /** The server's time for one read of the log (maxTimeMS), whose cost grows with the log. */
  private readonly maxTimeMS: number;

  /**
   * @param options.lateRowsMs A row is readable (read concern majority) once its append is
   *   acknowledged, which takes at most the store's bound of a command (mongo-timeouts.ts): its
   *   id can be that much older than the moment it is first read.
   * @param options.maxTimeMS Where a read of the log stops on the server: a team's counts, a
   *   filtered listing or export that passes over many rows. A read of a range then fails with
   *   LogReadTooLargeError; latestByConsentId, which reads a bounded number of rows, with the
   *   driver's error (a server too busy for now, unavailable).
   */
  constructor(
    private readonly collection: Collection<ConsentLogDocument>,
    options: { lateRowsMs: number; maxTimeMS: number },
  ) {
    this.lateRowsMs = options.lateRowsMs;
    this.maxTimeMS = options.maxTimeMS;
  }

  async newestId(): Promise<string | undefined> {
    const newest = await this.collection.findOne(
      {},
      { sort: { _id: -1 }, projection: { _id: 1 }, maxTimeMS: this.maxTimeMS },
    );
    return newest?._id;
  }

  /** Durable on resolve: the client's write concern is majority and journaled. */
  async append(record: ConsentLogRecord, options: AppendOptions = {}): Promise<void> {
    const document = toDocument(record);
    if (options.event) document.outbox = { type: options.event, dueAt: record.receivedAt };
    await insertUnique(this.collection, document, "consent log row");
  }

  async list(query: ConsentLogQuery): Promise<ConsentLogRecord[]> {
    // limit(0) means "no limit" to MongoDB; the port means "no rows".
    if (query.limit <= 0) return [];
    const documents = await this.withinTimeLimit(query, (options) =>
      this.collection.find(filterOf(query), options).sort({ _id: -1 }).limit(query.limit).toArray(),
    );
    return documents.map(toRecord);
  }

  /**
   * Served by the team's _id order (consent_log_by_team, or consent_log_by_banner with a
   * publicId). With `skipIds` (a tail's sweep over rows it mostly holds already) a page is read
   * as ids alone, which those indexes cover when no method or time filter is set, and only the
   * rows not skipped are fetched whole: the skipped ids stay out of the query document, which a
   * tail's window could swell past what a query should carry.
   */
  async listForward(query: ConsentLogForwardQuery): Promise<ConsentLogRecord[]> {
    if (query.limit <= 0) return [];
    return this.withinTimeLimit(query, (options) => this.readForward(query, options));
  }

  private async readForward(
    query: ConsentLogForwardQuery,
    options: LogReadOptions,
  ): Promise<ConsentLogRecord[]> {
    const pageAfter = (afterId: string | undefined) => filterOf({ ...query, afterId });
    const skip = query.skipIds;
    if (!skip || skip.size === 0) {
      const documents = await this.collection
        .find(pageAfter(query.afterId), options)
        .sort({ _id: 1 })
        .limit(query.limit)
        .toArray();
      return documents.map(toRecord);
    }
    const rows: ConsentLogRecord[] = [];
    let afterId = query.afterId;
    for (;;) {
      const page = await this.collection
        .find(pageAfter(afterId), { ...options, projection: { _id: 1 } })
        .sort({ _id: 1 })
        .limit(query.limit)
        .toArray();
      const wanted = page.map((document) => document._id).filter((id) => !skip.has(id));
      if (wanted.length > 0) {
        // A row purged since its id was read is simply not found.
        const documents = await this.collection
          .find({ teamId: query.teamId, _id: { $in: wanted } }, options)
          .sort({ _id: 1 })
          .toArray();
        rows.push(...documents.map(toRecord));
      }
      // Rows come in id order, page after page: the first `limit` are the answer.
      if (rows.length >= query.limit) return rows.slice(0, query.limit);
      if (page.length < query.limit) return rows;
      afterId = page.at(-1)?._id;
    }
  }

  /** One aggregation: $match on the query's index, then the three counts side by side ($facet). */
  async stats(query: ConsentLogStatsQuery): Promise<ConsentLogStats> {
    const [result] = await this.withinTimeLimit(query, (options) =>
      this.collection
        .aggregate<StatsFacets>(
          [{ $match: filterOf(query) }, { $facet: statsFacets(query) }],
          options,
        )
        .toArray(),
    );
    const choices = result?.choices[0];
    return {
      total: (result?.byMethod ?? []).reduce((sum, group) => sum + group.count, 0),
      byMethod: Object.fromEntries((result?.byMethod ?? []).map((g) => [g._id, g.count])),
      byDay: (result?.byDay ?? []).map((g) => ({ day: g._id, count: g.count })),
      explicitChoices: choices?.explicitChoices ?? 0,
      optedIn: choices?.optedIn ?? 0,
    };
  }

  /**
   * The consentId's newest CONSENT_ID_SCAN_LIMIT rows, served by consent_log_by_consent_id
   * (equality on team and consentId, then the newest _id), and the first of them of the banner:
   * the same bound and answer as the LMDB adapter. The index keeps its key, so an existing
   * deployment needs no new index build at start-up; the bannerId $match comes after the $limit,
   * which MongoDB never moves ahead of it. Rows are acknowledged at write concern majority, so
   * this majority read sees a row just appended.
   */
  async latestByConsentId(
    teamId: string,
    bannerId: string,
    consentId: string,
  ): Promise<ConsentLogRecord | null> {
    const [document] = await this.collection
      .aggregate<WithId<ConsentLogDocument>>(
        [
          { $match: { teamId, consentId } },
          { $sort: { _id: -1 } },
          { $limit: CONSENT_ID_SCAN_LIMIT },
          { $match: { bannerId } },
          { $limit: 1 },
        ],
        { maxTimeMS: this.maxTimeMS },
      )
      .toArray();
    return document ? toRecord(document) : null;
  }

  /**
   * A read of a range, stopped by the server at maxTimeMS or by its call's cancellation
   * (cancellableRead). One the server stopped passes over more rows than it reads in that time,
   * and would again: LogReadTooLargeError, which the caller is told to narrow, not a store out of
   * reach to retry.
   */
  private async withinTimeLimit<T>(
    query: Pick<ConsentLogQuery, "cancel">,
    read: (options: LogReadOptions) => Promise<T>,
  ): Promise<T> {
    try {
      return await cancellableRead(query.cancel, (cancelled) =>
        read({ maxTimeMS: this.maxTimeMS, ...cancelled }),
      );
    } catch (error) {
      if (error instanceof MongoServerError && error.code === MAX_TIME_MS_EXPIRED) {
        throw new LogReadTooLargeError(this.maxTimeMS, { cause: error });
      }
      throw error;
    }
  }
}

/** The options of every read of a range of the log: the server's bound, the call's cancellation. */
type LogReadOptions = { maxTimeMS: number } & Abortable;

/** What the $facet stage of stats() answers with. */
interface StatsFacets {
  byMethod: { _id: string; count: number }[];
  byDay: { _id: string; count: number }[];
  choices: { explicitChoices: number; optedIn: number }[];
}

/**
 * The facets of stats(): rows per method, rows per UTC day of receivedAt, and the explicit choices
 * (every method but consent_default, spec 3.3) with how many of them opted in: accepted a category
 * that is not among the required ones of the row's banner (consent-log-rules.ts isOptIn).
 */
function statsFacets(query: ConsentLogStatsQuery): Record<string, Document[]> {
  const banners = Object.entries(query.requiredCategories);
  // $switch needs at least one branch; with no banner known nothing is required.
  const required =
    banners.length === 0
      ? { $literal: [] }
      : {
          $switch: {
            branches: banners.map(([publicId, names]) => ({
              // $literal: a value is never read as a field path or an operator.
              case: { $eq: ["$publicId", { $literal: publicId }] },
              // biome-ignore lint/suspicious/noThenProperty: $switch's branch field is named "then"
              then: { $literal: [...names] },
            })),
            default: { $literal: [] },
          },
        };
  const acceptsOptional = {
    $anyElementTrue: [
      {
        $map: {
          input: { $objectToArray: { $ifNull: ["$preferences", {}] } },
          as: "category",
          in: {
            $and: [
              { $eq: ["$$category.v", true] },
              { $not: [{ $in: ["$$category.k", required] }] },
            ],
          },
        },
      },
    ],
  };
  return {
    byMethod: [{ $group: { _id: "$method", count: { $sum: 1 } } }],
    byDay: [
      {
        $group: {
          _id: { $dateToString: { format: "%Y-%m-%d", date: "$receivedAt", timezone: "UTC" } },
          count: { $sum: 1 },
        },
      },
      { $sort: { _id: 1 } },
    ],
    choices: [
      { $match: { method: { $ne: "consent_default" } } },
      {
        $group: {
          _id: null,
          explicitChoices: { $sum: 1 },
          optedIn: { $sum: { $cond: [acceptsOptional, 1, 0] } },
        },
      },
    ],
  };
}

/**
 * The filter of a query: team (and banner) equality, then a range of `_id`, which is a range of
 * the query's index (consent_log_by_team, consent_log_by_banner), and the other conditions checked
 * on each row in it. A row's id is never below its receipt's millisecond (lowestIdAt), so `since`
 * bounds the ids as well: a read from `since` on starts there in the index instead of passing
 * over the team's whole older history. `until` bounds receivedAt alone: an id runs ahead of its
 * receipt's time by as far as its daemon's clock had stepped back, so no id is certain to follow
 * every row received before `until`.
 */
function filterOf(
  query: Omit<ConsentLogQuery, "beforeId" | "limit"> & { beforeId?: string; afterId?: string },
): Filter<ConsentLogDocument> {
  const filter: Filter<ConsentLogDocument> = { teamId: query.teamId };
  if (query.publicId !== undefined) filter.publicId = query.publicId;
  if (query.methods !== undefined) filter.method = { $in: [...query.methods] };
  // consent_log_by_consent_id: equality on team and consentId, then the same range of _id.
  if (query.consentId !== undefined) filter.consentId = query.consentId;
  if (query.since !== undefined || query.until !== undefined) {
    filter.receivedAt = {
      ...(query.since !== undefined && { $gte: query.since }),
      ...(query.until !== undefined && { $lt: query.until }),
    };
  }
  if (query.since !== undefined || query.beforeId !== undefined || query.afterId !== undefined) {
    filter._id = {
      ...(query.since !== undefined && { $gte: lowestIdAt(query.since.getTime()) }),
      ...(query.afterId !== undefined && { $gt: query.afterId }),
      ...(query.beforeId !== undefined && { $lt: query.beforeId }),
    };
  }
  return filter;
}

function toDocument(record: ConsentLogRecord): ConsentLogDocument {
  return withoutAbsent({
    _id: record.id,
    teamId: record.teamId,
    bannerId: record.bannerId,
    publicId: record.publicId,
    consentId: record.consentId,
    method: record.method,
    preferences: { ...record.preferences },
    revision: record.revision,
    languageCode: record.languageCode,
    country: record.country,
    region: record.region,
    matchedRuleId: record.matchedRuleId,
    gpc: record.gpc,
    purposeChoices: record.purposeChoices && withoutAbsent({ ...record.purposeChoices }),
    services: record.services,
    pageUrl: record.pageUrl,
    occurredAt: record.occurredAt,
    timestampClamped: record.timestampClamped,
    receivedAt: record.receivedAt,
  });
}

function toRecord(document: WithId<ConsentLogDocument>): ConsentLogRecord {
  return withoutAbsent({
    id: document._id,
    teamId: document.teamId,
    bannerId: document.bannerId,
    publicId: document.publicId,
    consentId: document.consentId,
    method: document.method,
    preferences: { ...document.preferences },
    revision: document.revision,
    languageCode: document.languageCode,
    country: document.country,
    region: document.region,
    matchedRuleId: document.matchedRuleId,
    gpc: document.gpc,
    purposeChoices: document.purposeChoices && withoutAbsent({ ...document.purposeChoices }),
    services: document.services,
    pageUrl: document.pageUrl,
    occurredAt: document.occurredAt,
    timestampClamped: document.timestampClamped,
    receivedAt: document.receivedAt,
  });
}

/**
 * Drops undefined and null fields: the driver would store undefined as null, and an optional field
 * of the port is either present with a value or missing.
 */
function withoutAbsent<T extends object>(value: T): T {
  return Object.fromEntries(
    Object.entries(value).filter(([, field]) => field !== undefined && field !== null),
  ) as T;
}
