import {
  MongoBulkWriteError,
  MongoClientClosedError,
  MongoError,
  MongoErrorLabel,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerClosedError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from "mongodb";
import {
  PASSING_OUTAGE_RETRY_AFTER_SECONDS,
  UNTIL_OPERATOR_RETRY_AFTER_SECONDS,
} from "#daemon/errors.js";
import type { StoreUnavailability } from "#daemon/store/store.js";

/** Driver errors that mean no server could serve the operation for now, not a refused request. */
const UNREACHABLE = [
  MongoNetworkError, // MongoNetworkTimeoutError too
  MongoServerSelectionError,
  MongoNotConnectedError,
  MongoTopologyClosedError,
  MongoServerClosedError,
  // A command in flight when the store closes (a drain's cut, a tail still reading): the same
  // state as one sent after it (MongoNotConnectedError) or one still finding its server.
  MongoClientClosedError,
  MongoOperationTimeoutError,
];
/**
 * The driver's pool errors it throws but does not export, by name: no pooled connection came free
 * within waitQueueTimeoutMS, or the pool closed (the store closing) while a command waited for one.
 */
const UNREACHABLE_POOL = ["MongoWaitQueueTimeoutError", "MongoPoolClosedError"];
/** Labels the server or the driver put on an error worth retrying as it is. */
const RETRYABLE_LABELS = [
  MongoErrorLabel.RetryableWriteError,
  MongoErrorLabel.TransientTransactionError,
  MongoErrorLabel.RetryableError,
  MongoErrorLabel.SystemOverloadedError,
  MongoErrorLabel.PoolRequestedRetry,
  MongoErrorLabel.ResetPool,
];
/** MongoDB's UnsatisfiableWriteConcern: too few data-bearing members in the set's configuration. */
const UNSATISFIABLE_WRITE_CONCERN = 100;
/** MongoDB's KeyNotFound: no key of its own validates the cluster time a command carried. */
const KEY_NOT_FOUND = 211;
/** MongoDB's Interrupted and ClientMarkedKilled: a command killed (killOp, killSessions). */
const KILLED = new Set([11601, 46841]);
/** MongoDB's ConfigServerUnreachable: a mongos that cannot reach the config server replica set. */
const CONFIG_SERVER_UNREACHABLE = 56846;

/**
 * Server codes of MongoDB unable to serve for now, not refusing the request. From the driver
 * (node_modules/mongodb/src/error.ts): its retryable codes (RETRYABLE_READ_ERROR_CODES, also its
 * RETRYABLE_WRITE_ERROR_CODES: the retryable-reads and retryable-writes specifications), its "not
 * writable primary" and "node is recovering" codes (SDAM_NOT_PRIMARY_CODES, SDAM_RECOVERING_CODES),
 * and the shard routing codes among its resumable ones (GET_MORE_RESUMABLE_CODES): a mongos or
 * shard whose routing table is behind a chunk migration or a collection's recreation, which it
 * refreshes. Beside those, their kin for a database rather than a collection: StaleDbVersion, a
 * router whose record of the database's primary shard is behind a movePrimary or a dropDatabase,
 * and MovePrimaryInProgress, a write to an unsharded collection while movePrimary moves it, which
 * ends with the move. From the server (src/mongo/base/error_codes.yml): its RetriableError and
 * SystemOverloadedError categories but the InternalOnly codes, which never reach a client; its
 * NotYetInitialized, a member whose replica set configuration is not loaded yet (start-up refuses a
 * set never initiated, mongo-topology.ts); its KeyNotFound, a set or a cluster just initiated whose
 * keys for signing cluster times are not replicated yet; and its TemporarilyUnavailable, a write
 * that the storage engine's cache pressure kept from proceeding; its ElectionInProgress, a command
 * met while the set elects a primary (the driver's lists leave it out: it is no state change of
 * the member that answered); its InterruptedDueToStorageChange, a command stopped while the member
 * swaps its storage (a rollback's); its Interrupted and ClientMarkedKilled, a command an operator
 * or the server killed (killOp, killSessions), which its retry runs again (a warning names the
 * kill, KILLED_WARNING); and its ConfigServerUnreachable, a mongos that cannot reach the config
 * server replica set for the routing it needs, which ends when that set answers again (a warning
 * names it, CONFIG_SERVER_UNREACHABLE_WARNING). The driver sends a read or a write again once
 * after the codes it retries (retryReads, retryWrites); the others reach the service at once.
 * Each passes by itself, within seconds.
 *
 * Beside those: 64, a write concern that timed out (wtimeoutMS) while a majority did not answer;
 * 100, one the set cannot meet at all as it stands (too few data-bearing members in its
 * configuration); and 50, a read stopped at its maxTimeMS that reads a bounded number of rows (a
 * consent record's latest choice): a server too busy for now. A write concern error (64, 100, or
 * a step-down's 91, 189, 11602 while waiting) comes after the primary applied the write: its
 * outcome is unknown, as when the store is out of reach. 100 lasts until the set's operator
 * repairs the set (README, "MongoDB"), so its 503 asks for a retry in minutes and its warning
 * tells the operator what to repair (mongoUnavailability).
 * A consent log read of a time range stopped so is the query's size, not the server's state: its
 * adapter answers it as LogReadTooLargeError (mongo-consent-log-store.ts), which is not this.
 */
const UNAVAILABLE_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  50, // MaxTimeMSExpired
  63, // StaleShardVersion (the driver's resumable codes; StaleConfig in later servers)
  64, // WriteConcernFailed, WriteConcernTimeout from 8.1 (wtimeout)
  89, // NetworkTimeout
  91, // ShutdownInProgress
  94, // NotYetInitialized
  UNSATISFIABLE_WRITE_CONCERN,
  133, // FailedToSatisfyReadPreference (mongos: a shard without a primary for now)
  134, // ReadConcernMajorityNotAvailableYet
  150, // StaleEpoch (a sharded collection dropped and recreated, or its shard key refined)
  189, // PrimarySteppedDown
  202, // NetworkInterfaceExceededTimeLimit (mongos to a shard)
  KEY_NOT_FOUND,
  216, // ElectionInProgress
  249, // StaleDbVersion (mongos: the database's primary shard moved or was dropped)
  262, // ExceededTimeLimit
  319, // MovePrimaryInProgress (a write to an unsharded collection while movePrimary moves it)
  355, // InterruptedDueToStorageChange
  358, // InternalTransactionNotSupported
  365, // TemporarilyUnavailable
  402, // ResourceExhausted
  406, // MigrationBlockingOperationCoordinatorCleaningUp
  407, // PooledConnectionAcquisitionExceededTimeLimit (mongos to a shard)
  412, // UpdatesStillPending
  433, // AdmissionQueueOverflow
  449, // RateLimitExceeded
  450, // PooledConnectionAcquisitionRejected
  453, // InterruptedDueToReshardingCriticalSection
  462, // IngressRequestRateLimitExceeded
  9001, // SocketException
  10058, // LegacyNotPrimary
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  ...KILLED, // Interrupted (11601), ClientMarkedKilled (46841)
  11602, // InterruptedDueToReplStateChange
  13388, // StaleConfig
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
  50915, // BackupCursorOpenConflictWithCheckpoint
  CONFIG_SERVER_UNREACHABLE,
  91331, // RetriableRemoteCommandFailure
  10045600, // InterruptedDueToFCVChange
]);

/**
 * Whether a driver error is MongoDB being out of reach for now rather than a refused request,
 * every bound of mongo-timeouts.ts that passed included. The driver has already retried a
 * retryable read or write once when it throws one of those it retries (retryReads, retryWrites),
 * so the caller gets 503 and retries later (spec 7). A write that timed out waiting for its majority
 * may still be applied: the client's retry then meets it as an ordinary write would (a PUT's
 * `baseVersion` answers 409 with the state it holds).
 */
export function isMongoUnavailable(thrown: unknown): boolean {
  if (!(thrown instanceof MongoError)) return false;
  const error = originalOf(thrown);
  if (UNREACHABLE.some((kind) => error instanceof kind)) return true;
  if (UNREACHABLE_POOL.includes(error.name)) return true;
  if (RETRYABLE_LABELS.some((label) => error.hasErrorLabel(label))) return true;
  return typeof error.code === "number" && UNAVAILABLE_CODES.has(error.code);
}

/**
 * What the operator reads of UnsatisfiableWriteConcern (100): not the store briefly out of reach,
 * which passes by itself, but a replica set whose configuration has too few data-bearing members
 * for a majority (an arbiter counts towards the set's voting members but holds no data), which
 * only they can change. Each write checks the configuration as it stands, so writes resume once
 * the set has enough, without a restart. The client reads none of this: its 503 is the generic
 * `unavailable` of every outage (rpc/connect-errors.ts), as no internal text reaches a caller.
 */
const UNSATISFIABLE_WRITE_CONCERN_WARNING = `MongoDB's replica set cannot acknowledge majority writes (UnsatisfiableWriteConcern): its configuration has too few data-bearing members to make a majority; writes fail with unavailable (Retry-After: ${UNTIL_OPERATOR_RETRY_AFTER_SECONDS}) until the operator adds a data-bearing member to the set (rs.add) or replaces an arbiter with one (rs.reconfig); the daemon needs no restart`;

/**
 * What the operator reads of KeyNotFound (211), in place of the store briefly out of reach: a
 * set just started answers it while its cluster-time signing keys replicate, which passes within
 * seconds, so the client's 503 keeps Retry-After: 1; but the driver sends the highest cluster time
 * it has seen, so a deployment restored or rebuilt under a running daemon (other keys, an older
 * clock) answers it to every command until the daemon restarts and forgets that time.
 */
const KEY_NOT_FOUND_WARNING =
  "MongoDB cannot validate the cluster time the daemon sends (KeyNotFound): a replica set just started answers this until its signing keys replicate, within seconds; if it lasts, the deployment was restored or rebuilt while the daemon ran, and calls fail with unavailable until the daemon is restarted";

/**
 * What the operator reads of Interrupted (11601) or ClientMarkedKilled (46841): not the store out
 * of reach but a command killed on the server, by an operator (db.killOp(), killSessions) or by
 * the server itself. The call answers 503 with Retry-After: 1 (its retry runs the command again,
 * as a call cut by a lost connection), and the warning says who could have killed it, so that a
 * kill meant to stop a costly read is not taken for an outage.
 */
const KILLED_WARNING =
  "MongoDB killed a command of the daemon (Interrupted or ClientMarkedKilled): an operator (db.killOp(), killSessions) or the server stopped it; its call failed with unavailable, and the client's retry runs it again";

/**
 * What the operator reads of ConfigServerUnreachable (56846): a mongos answers it while it cannot
 * reach the config server replica set for the routing it needs, which an election of that set
 * ends within seconds, so the 503 keeps Retry-After: 1; one that lasts is that set down or cut
 * off from the routers, which only the operator ends.
 */
const CONFIG_SERVER_UNREACHABLE_WARNING =
  "MongoDB's router (mongos) cannot reach the config server replica set (ConfigServerUnreachable): calls fail with unavailable until it can; if it lasts, check that the config servers are up and reachable from every mongos";

/** The warnings of the passing outages the operator reads in words of their own. */
const WARNING_OF_CODE = new Map<number, string>([
  [KEY_NOT_FOUND, KEY_NOT_FOUND_WARNING],
  ...[...KILLED].map((code): [number, string] => [code, KILLED_WARNING]),
  [CONFIG_SERVER_UNREACHABLE, CONFIG_SERVER_UNREACHABLE_WARNING],
]);

/**
 * The store out of reach as a MongoDB error shows it (Store.unavailability), for one that
 * `isMongoUnavailable` takes: a write concern the replica set cannot satisfy as configured (100)
 * does not end by itself but when the operator repairs the set, so the caller is told to come back
 * in minutes, as for a missing identity key, and the operator what to repair; any other passes
 * with an election or a reconnection: 1 s, with a warning of its own for those the operator may
 * have to look into (WARNING_OF_CODE): a cluster time no key validates (211), which may last until
 * a restart; a command killed (11601, 46841); a router without its config servers (56846).
 */
export function mongoUnavailability(error: unknown): StoreUnavailability | undefined {
  if (!(error instanceof MongoError) || !isMongoUnavailable(error)) return undefined;
  const judged = originalOf(error);
  const cause = causeInLog(judged);
  if (judged.code === UNSATISFIABLE_WRITE_CONCERN) {
    return {
      retryAfterSeconds: UNTIL_OPERATOR_RETRY_AFTER_SECONDS,
      warning: UNSATISFIABLE_WRITE_CONCERN_WARNING,
      cause,
    };
  }
  const warning = typeof judged.code === "number" ? WARNING_OF_CODE.get(judged.code) : undefined;
  return {
    retryAfterSeconds: PASSING_OUTAGE_RETRY_AFTER_SECONDS,
    ...(warning !== undefined && { warning }),
    cause,
  };
}

/**
 * A driver error as the outage's log line names it (StoreUnavailability.cause), the one
 * `isMongoUnavailable` judged (originalOf): its name, the server's code and codeName, its labels
 * (which the driver holds in a Set, written `{}` by a JSON log) and its message; not its stack.
 */
function causeInLog(error: MongoError): Record<string, unknown> {
  const labels = error.errorLabels;
  return {
    name: error.name,
    ...(error.code !== undefined && { code: error.code }),
    ...(error instanceof MongoServerError && error.codeName && { codeName: error.codeName }),
    ...(labels.length > 0 && { labels }),
    message: error.message,
  };
}

/**
 * The error to judge: bulkWrite (a webhook fan-out) wraps every driver error it meets, a lost
 * connection or no primary found included, in a MongoBulkWriteError that keeps the original as
 * errorResponse but not its class (a write concern error it carries as its own code).
 */
function originalOf(error: MongoError): MongoError {
  return error instanceof MongoBulkWriteError && error.errorResponse instanceof MongoError
    ? originalOf(error.errorResponse)
    : error;
}
