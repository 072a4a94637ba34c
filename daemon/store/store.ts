import type { BannerStore } from "#daemon/banners/banner-store.js";
import type { ConsentLogStore } from "#daemon/consent-log/consent-log-store.js";
import type { KeyStore } from "#daemon/keys/key-store.js";
import type { CounterStore } from "#daemon/limits/counter-store.js";
import type { SessionStore } from "#daemon/sessions/session-store.js";
import type { SubjectStore } from "#daemon/subjects/subject-store.js";
import type { TeamStore } from "#daemon/teams/team-store.js";
import type { WebhookStore } from "#daemon/webhooks/webhook-store.js";

/** The store out of reach for now, as one error shows it (Store.unavailability). */
export interface StoreUnavailability {
  /**
   * The Retry-After, in seconds, of the 503 the error answers: one that passes by itself (an
   * election, a lost connection) 1 s; one that lasts until the operator acts (MongoDB's replica
   * set that cannot provide a majority as configured) minutes (daemon/errors.ts).
   */
  retryAfterSeconds: number;
  /**
   * What the daemon logs in place of the store briefly out of reach, for one that only the
   * operator may have to end: what is wrong and what to do (MongoDB's replica set with too few
   * data-bearing members for a majority). Unset for one that passes by itself. Only the log says
   * it: the client's 503 stays spec 7's `unavailable`.
   */
  warning?: string;
  /**
   * The error as the outage's log line names it (`storeError`): what the operator reads of it (for
   * MongoDB, the driver error's name, code, codeName, labels and message), never its stack, which
   * a line per outage would only repeat: the error is the backend's answer, not a fault to trace
   * in the service.
   */
  cause: Readonly<Record<string, unknown>>;
}

/**
 * The storage port of the daemon: one adapter per backend (LMDB, the embedded default, and
 * MongoDB), chosen only by main.ts. Services depend on this interface alone.
 */
export interface Store {
  readonly kind: "lmdb" | "mongodb";
  readonly teams: TeamStore;
  readonly keys: KeyStore;
  readonly sessions: SessionStore;
  readonly banners: BannerStore;
  readonly subjects: SubjectStore;
  readonly consentLog: ConsentLogStore;
  readonly counters: CounterStore;
  /** Webhook endpoints, the event outbox the consent log's append fills, and deliveries. */
  readonly webhooks: WebhookStore;
  /**
   * What the backend found at open lacks that the operator should know, each in one line with
   * what to do: logged once per service at start-up (main.ts). MongoDB: a standalone server
   * (mongo-store.ts). The embedded store reports its own state as it meets it: none.
   */
  readonly startWarnings: readonly string[];
  /** Resolves when the backend answers; rejects otherwise. */
  ping(): Promise<void>;
  /**
   * Whether the store accepts writes now: false while the embedded store's disk guard refuses
   * them (disk-guard.ts). MongoDB answers each write itself, so its adapter always says true.
   */
  acceptsWrites(): boolean;
  /**
   * What an error a call on this store threw says of the backend out of reach for now (a
   * replica-set election, a lost connection, a majority that did not answer in time), or
   * undefined for any other error: the request then fails with 503 `unavailable` and the
   * outage's Retry-After, which spec 7 tells clients to retry, instead of 500. The embedded store
   * has no such state: always undefined.
   */
  unavailability(error: unknown): StoreUnavailability | undefined;
  /**
   * Whether an error a call on this store threw is the embedded store's damage (LMDB's
   * MDB_CORRUPTED and kin, see `damageOf`): the call fails with 500 as any internal error, but
   * the damage was logged once when first met, so such failures are not logged one by one.
   * MongoDB checks its own data: always false.
   */
  isDamage(error: unknown): boolean;
  /**
   * Records damage that another process on the same files met (npm start's workers relay it to
   * each other; that process logged it). Once the embedded store knows of damage, met by one of
   * its own calls (LMDB's MDB_CORRUPTED and kin) or reported, `ping()` rejects, so health says
   * NOT_SERVING until the process restarts. MongoDB checks its own data: a no-op.
   */
  reportDamage(reason: string): void;
  /**
   * Makes this process's next reads see every write stored so far, by any process: called when
   * another process reports a write (read-cache.ts forgetCachedReads). The embedded store reads
   * from a snapshot it keeps until its next timer; MongoDB reads the primary each time: a no-op.
   */
  refreshReads(): void;
  /** Releases connections and file handles. */
  close(): Promise<void>;
}

/**
 * The cancellation of the call a store read serves: the call's context (HandlerContext), whose
 * signal aborts when its caller leaves (caller-presence.ts, or a reset stream), its deadline
 * passes or the daemon stops. An adapter reads `signal` only as the read reaches its backend: a
 * call in this process makes its signal only when asked (daemon/rpc/call-context.ts), which the
 * embedded store, whose reads end within its own bounds, never does. Given to the reads that a
 * caller starts and that can be long: lists and the consent log's reads (not a subject's
 * look-up, one short read by its key, which would cost a pooled connection when stopped).
 */
export interface ReadCancellation {
  readonly signal: AbortSignal;
}

/** Thrown by insert() when a unique field (id, keyHash, tokenHash, publicId) is already taken. */
export class DuplicateKeyError extends Error {
  constructor(what: string, options?: ErrorOptions) {
    super(`duplicate ${what}`, options);
    this.name = "DuplicateKeyError";
  }
}

/**
 * Thrown by an insert under a team's maximum (a webhook endpoint's, a banner's) that lost the race
 * for a place too many times in a row, other creates (and removals) of the team racing with it:
 * nothing was stored, and the request may be sent again. `what` names the record.
 */
export class InsertContendedError extends Error {
  constructor(what: string, options?: ErrorOptions) {
    super(`${what} inserts of this team keep losing the race for a place`, options);
    this.name = "InsertContendedError";
  }
}

/**
 * The layout of the stored records this version reads and writes. A store holds no marker of it
 * until a version that changes the layout writes one as it migrates (the embedded store: key
 * `format` of its `meta` database, a number; MongoDB: `{ _id: "format", value }` in the `meta`
 * collection); a store marked otherwise is refused at open, rather than served by code that
 * would misread its records. No marker is format 1.
 */
export const STORE_FORMAT = 1;

/** Refuses a store whose format marker names a layout this version does not read. */
export function checkStoreFormat(marker: unknown): void {
  const problem = storeFormatProblem(marker);
  if (problem !== undefined) throw new Error(`${problem.reason}: ${problem.advice}`);
}

/**
 * Why this version cannot read a store with this format marker, and what to do, or undefined when
 * it can. A version writes a positive whole number; anything else was not written by the service.
 */
export function storeFormatProblem(
  marker: unknown,
): { reason: string; advice: string; backupAdvice: string } | undefined {
  if (marker === undefined || marker === null || marker === STORE_FORMAT) return undefined;
  if (typeof marker !== "number" || !Number.isInteger(marker) || marker < 1) {
    const shown = JSON.stringify(marker) ?? String(marker);
    return {
      reason: `its format marker holds ${shown.length > 40 ? `${shown.slice(0, 39)}…` : shown}, which no version of the service writes (this version reads format ${STORE_FORMAT})`,
      advice: "the marker was changed by something else; restore a backup made by the service",
      backupAdvice: "the marker was changed by something else; keep an older backup too",
    };
  }
  return {
    reason: `its records are marked as format ${marker}, written by another version of the service; this version reads format ${STORE_FORMAT}`,
    advice: "run a version that reads it, or restore a backup made by this one",
    backupAdvice: "restore it with the version that wrote it",
  };
}
