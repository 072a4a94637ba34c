import { DomainError } from "#daemon/errors.js";
import type { ReadCancellation } from "#daemon/store/store.js";

export interface PurposeChoices {
  saleSharing?: boolean;
  targetedAdvertising?: boolean;
  sensitiveData?: boolean;
  profiling?: boolean;
}

/**
 * One privacy-minimised consent log row (spec 2.5, decisions §5): no IP address, no user agent,
 * no subject id; the page address already reduced to the banner's telemetry level.
 */
export interface ConsentLogRecord {
  /** consentLogId: a UUIDv7, so ids sort by time of receipt. Unique. */
  id: string;
  teamId: string;
  /** Internal banner id. */
  bannerId: string;
  /** Public Banner ID. */
  publicId: string;
  consentId: string;
  method: string;
  preferences: Record<string, boolean>;
  revision?: number;
  languageCode?: string;
  country?: string;
  region?: string;
  matchedRuleId?: string;
  gpc?: boolean;
  purposeChoices?: PurposeChoices;
  /** spec 2.4 `services`: accepted category name → the names of its services. */
  services?: Record<string, string[]>;
  pageUrl?: string;
  /** Client time of the choice after clamping. */
  occurredAt: Date;
  timestampClamped: boolean;
  receivedAt: Date;
}

/** Filters of a log listing; rows come newest first (descending id). */
export interface ConsentLogQuery {
  teamId: string;
  publicId?: string;
  methods?: readonly string[];
  /** Only the rows of this consent record (lower-case, as rows hold it). */
  consentId?: string;
  /** receivedAt >= since */
  since?: Date;
  /** receivedAt < until */
  until?: Date;
  /** Only rows with an id lower than this one (the previous page's last id). */
  beforeId?: string;
  limit: number;
  /** Stops the read (ReadCancellation). */
  cancel?: ReadCancellation;
}

/** Filters of an oldest-first read: what follows a position (tail) or a whole range (export). */
export interface ConsentLogForwardQuery extends Omit<ConsentLogQuery, "beforeId"> {
  /** Only rows with an id higher than this one (the last row already read). */
  afterId?: string;
  /**
   * Rows with these ids are left out, and not counted toward `limit`: rows the reader holds
   * already (a tail re-reading its lookback window). A store may pass them over unread.
   */
  skipIds?: ReadonlySet<string>;
}

/** Filters of a count; `requiredCategories` decides which accepted categories are an opt-in. */
export interface ConsentLogStatsQuery extends Omit<ConsentLogQuery, "beforeId" | "limit"> {
  /**
   * Public Banner ID to the names of the categories its production configuration marks required.
   * A row opts in when its preferences accept (true) a category not listed for its banner.
   */
  requiredCategories: Readonly<Record<string, readonly string[]>>;
}

/** Counts of the rows a ConsentLogStatsQuery selects. */
export interface ConsentLogStats {
  total: number;
  /** Method to number of rows; methods without rows are absent. */
  byMethod: Record<string, number>;
  /** UTC day of receivedAt (YYYY-MM-DD) to number of rows, days in ascending order. */
  byDay: { day: string; count: number }[];
  /** Rows whose method is an explicit choice: every method but consent_default (spec 3.3). */
  explicitChoices: number;
  /** Explicit choices that accepted at least one category not required for their banner. */
  optedIn: number;
}

/**
 * Thrown by list, listForward and stats when the store stopped the read at its time limit
 * (MongoDB: maxTimeMS, CONSENT_MONGODB_TIMEOUT_MS; the embedded store: CONSENT_LOG_READ_TIMEOUT_MS,
 * checked every thousand rows): the read passes over more rows than the store reads in that time.
 * The same read fails again, so it is the caller's to narrow, no outage to retry (decisions §7:
 * failed_precondition, with its own machine code); one over a shorter time range, or of one
 * banner, passes over fewer. On MongoDB the driver's error is the cause.
 */
export class LogReadTooLargeError extends DomainError {
  constructor(
    /** The store's time limit of one read. */
    readonly limitMs: number,
    options?: ErrorOptions,
  ) {
    super(
      "failed_precondition",
      "query_too_broad",
      `The query passes over more of the team's consent log than the store reads within its limit of ${limitMs / 1000} s a read; narrow its time range (since, until) or name a banner`,
    );
    this.name = "LogReadTooLargeError";
    this.cause = options?.cause;
  }
}

/** What append() writes beside the row. */
export interface AppendOptions {
  /**
   * spec 1.4 and 6: an explicit choice's `consent.given` event, put in the webhook outbox
   * (daemon/webhooks/webhook-store.ts) by the same atomic write as the row.
   */
  event?: "consent.given";
}

/**
 * How many of a consentId's newest rows latestByConsentId looks at to find its banner's. Rows of
 * the team's other banners come before it only when an integrator shares one consentId across
 * banners (the runtime keeps one per banner) or someone posts rows with a consentId that is not
 * theirs: a visitor's own choices never come near this many, and the bound keeps a flood of such
 * rows from making every page load read them all (about 4 ms for 1,000 on the embedded store).
 */
export const CONSENT_ID_SCAN_LIMIT = 1_000;

/**
 * Storage port for the consent log. Rows are append-only. append() is one atomic store write
 * (the row together with its indexes and its outbox event): an acknowledged row always has its
 * event, and a failed append leaves neither, or (on MongoDB, a write whose majority did not
 * answer in time, or whose connection was lost after the server applied it) both.
 *
 * Every adapter bounds the time of one call of list, listForward and stats: a call still reading
 * at the store's limit fails with LogReadTooLargeError, never with part of its answer (a short
 * page of listForward would read as the end of the range). A read's cost is the rows it passes
 * over, those its filters leave out included; a log tail's reads carry no filter but the ids it
 * holds (skipIds), so a page of one costs the rows it returns, and a sweep's the ids of its
 * lookback window it passes over besides.
 */
export interface ConsentLogStore {
  /**
   * How long after its id's time a row may first be readable by listForward: a row's id is taken
   * from its daemon's clock before it commits, so it can become readable below ids already read.
   * A log tail re-reads that far back (consent-log-reads.ts).
   */
  readonly lateRowsMs: number;
  /**
   * The highest row id in the store, of any team (undefined while it holds none). A daemon takes
   * its ids above it (createLogIdGenerator's raise), so ids keep rising across daemons and
   * restarts whatever each one's clock did; `newestIdEveryMs` says how often a daemon reads it:
   * before every append (0) where a read costs next to nothing, else at most that often.
   */
  newestId(): Promise<string | undefined>;
  readonly newestIdEveryMs: number;
  /**
   * Appends a row (and its outbox event when options.event is set); both are durable once the
   * promise resolves. A row whose id is already stored is refused with DuplicateKeyError and
   * nothing is written.
   */
  append(record: ConsentLogRecord, options?: AppendOptions): Promise<void>;
  /** Rows of one team matching the query, newest first, at most query.limit. */
  list(query: ConsentLogQuery): Promise<ConsentLogRecord[]>;
  /**
   * The newest row (highest id) of this banner (internal id) with this consentId, or null: the
   * visitor's current choice, as the preferences page shows it (decisions §5). A consentId is the
   * visitor's own value, so other banners of the team may hold rows with it: those, and rows of
   * other teams, are never the answer. Only the consentId's CONSENT_ID_SCAN_LIMIT newest rows of
   * the team are looked at: when the banner's newest row lies beyond them, the answer is null.
   */
  latestByConsentId(
    teamId: string,
    bannerId: string,
    consentId: string,
  ): Promise<ConsentLogRecord | null>;
  /**
   * Rows of one team matching the query with an id above afterId, oldest first, at most
   * query.limit. Rows another process appended are seen once their append resolved.
   */
  listForward(query: ConsentLogForwardQuery): Promise<ConsentLogRecord[]>;
  /** Counts of one team's rows matching the query, computed by the store in one pass. */
  stats(query: ConsentLogStatsQuery): Promise<ConsentLogStats>;
}
