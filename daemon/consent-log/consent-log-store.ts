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
  /** receivedAt >= since */
  since?: Date;
  /** receivedAt < until */
  until?: Date;
  /** Only rows with an id lower than this one (the previous page's last id). */
  beforeId?: string;
  limit: number;
}

/**
 * Storage port for the consent log. Rows are append-only. append() is one atomic store write
 * (the row together with its indexes), so that a later outbox event can join the same write.
 */
export interface ConsentLogStore {
  /**
   * Appends a row; it is durable once the promise resolves. A row whose id is already stored is
   * refused with DuplicateKeyError and nothing is written.
   */
  append(record: ConsentLogRecord): Promise<void>;
  /** Rows of one team matching the query, newest first, at most query.limit. */
  list(query: ConsentLogQuery): Promise<ConsentLogRecord[]>;
  /**
   * The newest row (highest id) of the team with this consentId, or null: the visitor's current
   * choice, as the preferences page shows it (decisions §5). Rows of other teams are never seen.
   */
  latestByConsentId(teamId: string, consentId: string): Promise<ConsentLogRecord | null>;
}
