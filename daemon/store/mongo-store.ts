import {
  type Collection,
  type CollectionOptions,
  type Db,
  type DbOptions,
  type Document,
  type IndexDescription,
  MongoBulkWriteError,
  MongoClient,
  type MongoClientOptions,
  MongoError,
  MongoErrorLabel,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerClosedError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  ReadConcern,
} from "mongodb";
import { type BannerDocument, MongoBannerStore } from "#daemon/banners/mongo-banner-store.js";
import { StartupError } from "#daemon/config.js";
import {
  type ConsentLogDocument,
  MongoConsentLogStore,
} from "#daemon/consent-log/mongo-consent-log-store.js";
import { messageOf } from "#daemon/errors.js";
import { type ApiKeyDocument, MongoKeyStore } from "#daemon/keys/mongo-key-store.js";
import { type CounterDocument, MongoCounterStore } from "#daemon/limits/mongo-counter-store.js";
import { MongoSessionStore, type SessionDocument } from "#daemon/sessions/mongo-session-store.js";
import { checkStoreFormat, type Store } from "#daemon/store/store.js";
import { MongoSubjectStore, type SubjectDocument } from "#daemon/subjects/mongo-subject-store.js";
import { MongoTeamStore, type TeamDocument } from "#daemon/teams/mongo-team-store.js";
import {
  type DeliveryDocument,
  MongoWebhookStore,
  type WebhookEndpointDocument,
} from "#daemon/webhooks/mongo-webhook-store.js";

export interface MongoStoreOptions {
  /** A standard `mongodb://` or `mongodb+srv://` connection string (MONGODB_URI). */
  uri: string;
  /** Database to use; default: the one named in the URI, else "consent". */
  dbName?: string;
}

const SERVER_SELECTION_TIMEOUT_MS = 5_000;
/**
 * How long a write waits for its majority: past it the request fails (503 unavailable, nothing acknowledged)
 * instead of hanging while the primary is up but a majority is not (a secondary down beside an
 * arbiter). The write itself may still complete on the server.
 */
const MAJORITY_WAIT_MS = 10_000;

/**
 * Several daemons and gateways share one database (decisions §1), and an acknowledged write (a
 * consent log row, a subject version, a revocation) must survive a primary failover, so writes
 * wait for a journaled majority. Reads go to the primary with read concern majority: they never
 * return data a failover could roll back, and never lag behind a write on a secondary.
 * retryWrites/retryReads ride out an election or a dropped connection for every read and every
 * single-document write (bulk fan-out upserts included). The multi-document writes (a replay's
 * updateMany, the purges' and an endpoint's deliveries' deleteMany) are not retryable: an
 * election in the middle of one fails it to its caller.
 *
 * The concerns are set on the database (DB_OPTIONS), where the URI's own settings cannot weaken
 * them: a client's options give way to `?journal=false` or `?readConcernLevel=local` in the URI,
 * a database's do not. The client options below do override the URI's.
 */
const DB_OPTIONS: DbOptions = {
  writeConcern: { w: "majority", journal: true, wtimeoutMS: MAJORITY_WAIT_MS },
  readConcern: new ReadConcern("majority"),
  readPreference: "primary",
};
const CLIENT_OPTIONS: MongoClientOptions = {
  ...DB_OPTIONS,
  // A request that finds every pooled connection busy (a stalled primary holding them) waits
  // this long for one, then answers 503 rather than wait without end.
  waitQueueTimeoutMS: MAJORITY_WAIT_MS,
  retryWrites: true,
  retryReads: true,
  serverSelectionTimeoutMS: SERVER_SELECTION_TIMEOUT_MS,
  appName: "consent-service",
};

/** The service's database, with the concerns every collection but the counters' is written with. */
export function serviceDb(client: MongoClient, dbName: string): Db {
  return client.db(dbName, DB_OPTIONS);
}

/**
 * The rate-limit counters are written by every authenticated request, reads included, and hold
 * only the current windows, so they are written as the embedded store writes them (without
 * fsync, lmdb-store.ts): acknowledged by the primary alone, unjournaled, and read from it as it
 * stands. A primary without a majority (a secondary down beside an arbiter) then still serves
 * every read and every write whose own write concern can be met, instead of failing each request
 * after MAJORITY_WAIT_MS; a failover may lose the counts of the last moments, which at worst lets
 * a few requests more through in that window.
 */
const COUNTER_OPTIONS: CollectionOptions = {
  writeConcern: { w: 1, journal: false },
  readConcern: { level: "local" },
};

/**
 * Connects to MongoDB, creates the indexes the adapters rely on (createIndexes is idempotent, so
 * every start runs it) and returns the Store. Fails with a readable StartupError, the driver's as cause,
 * when the server cannot be reached within SERVER_SELECTION_TIMEOUT_MS or refuses the indexes.
 */
export async function openMongoStore(options: MongoStoreOptions): Promise<Store> {
  let client: MongoClient;
  try {
    client = new MongoClient(options.uri, CLIENT_OPTIONS);
  } catch (error) {
    // The driver's parse errors name the part it could not read, not the credentials.
    throw new StartupError(
      `MONGODB_URI is not a connection string MongoDB accepts: ${(error as Error).message}`,
      { cause: error },
    );
  }
  try {
    await client.connect();
  } catch (error) {
    await client.close();
    throw connectionError(error, options.uri);
  }
  try {
    const dbName = options.dbName ?? uriParts(options.uri).database ?? "consent";
    const db = serviceDb(client, dbName);
    const marker = await db
      .collection<{ _id: string; value: unknown }>("meta")
      .findOne({ _id: "format" });
    try {
      checkStoreFormat(marker?.value);
    } catch (error) {
      throw new StartupError(`cannot use the MongoDB database ${dbName}: ${messageOf(error)}`);
    }
    const store = createStore(client, db);
    try {
      await createIndexes(client, dbName);
    } catch (error) {
      // The driver's message names the server's reason (a privilege, a missing majority), never
      // the connection string.
      throw new StartupError(
        `MongoDB did not create the service's indexes (${(error as Error).message}): a start creates those the database lacks, which needs the createIndex privilege`,
        { cause: error },
      );
    }
    return store;
  } catch (error) {
    await client.close();
    throw error;
  }
}

function createStore(client: MongoClient, db: Db): Store {
  const collections = collectionsOf(db);
  return {
    kind: "mongodb",
    teams: new MongoTeamStore(collections.teams),
    keys: new MongoKeyStore(collections.keys),
    sessions: new MongoSessionStore(collections.sessions),
    banners: new MongoBannerStore(collections.banners),
    subjects: new MongoSubjectStore(collections.subjects),
    // A row acknowledged at the end of its majority wait, plus the margin the embedded store has.
    consentLog: new MongoConsentLogStore(collections.consentLog, MAJORITY_WAIT_MS + 5_000),
    counters: new MongoCounterStore(collections.counters),
    webhooks: new MongoWebhookStore(
      collections.webhookEndpoints,
      collections.webhookDeliveries,
      collections.consentLog,
    ),
    acceptsWrites: () => true,
    isUnavailable: isMongoUnavailable,
    isDamage: () => false,
    reportDamage: () => {},
    async ping() {
      await db.command({ ping: 1 });
    },
    async close() {
      await client.close();
    },
  };
}

/** Driver errors that mean no server could serve the operation for now, not a refused request. */
const UNREACHABLE = [
  MongoNetworkError, // MongoNetworkTimeoutError too
  MongoServerSelectionError,
  MongoNotConnectedError,
  MongoTopologyClosedError,
  MongoServerClosedError,
  MongoOperationTimeoutError,
];
/** Labels the server or the driver put on an error worth retrying as it is. */
const RETRYABLE_LABELS = [
  MongoErrorLabel.RetryableWriteError,
  MongoErrorLabel.TransientTransactionError,
  MongoErrorLabel.RetryableError,
  MongoErrorLabel.SystemOverloadedError,
  MongoErrorLabel.PoolRequestedRetry,
  MongoErrorLabel.ResetPool,
];
/**
 * Server codes of a replica set between primaries or of a node going away (the retryable codes
 * of the retryable-reads and retryable-writes specifications), and 64, a write concern that
 * timed out (MAJORITY_WAIT_MS) while a majority did not answer.
 */
const UNAVAILABLE_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  64, // WriteConcernFailed (wtimeout)
  89, // NetworkTimeout
  91, // ShutdownInProgress
  133, // FailedToSatisfyReadPreference (mongos: a shard without a primary for now)
  134, // ReadConcernMajorityNotAvailableYet
  189, // PrimarySteppedDown
  202, // NetworkInterfaceExceededTimeLimit (mongos to a shard)
  262, // ExceededTimeLimit
  9001, // SocketException
  10058, // LegacyNotPrimary
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/**
 * Whether a driver error is MongoDB being out of reach for now rather than a refused request.
 * The driver has already retried a retryable read or write once when it throws one of these
 * (retryReads, retryWrites), so the caller gets 503 and retries later (spec 7). A write that
 * timed out waiting for its majority may still be applied: the client's retry then meets it as
 * an ordinary write would (a PUT's `baseVersion` answers 409 with the state it holds).
 */
export function isMongoUnavailable(error: unknown): boolean {
  if (!(error instanceof MongoError)) return false;
  // bulkWrite (a webhook fan-out) wraps every driver error it meets, a lost connection or no
  // primary found included, in a MongoBulkWriteError that keeps the original as errorResponse
  // but not its class: judge the original.
  if (error instanceof MongoBulkWriteError && error.errorResponse instanceof MongoError) {
    return isMongoUnavailable(error.errorResponse);
  }
  if (UNREACHABLE.some((kind) => error instanceof kind)) return true;
  // No pooled connection came free within waitQueueTimeoutMS (the driver exports no class).
  if (error.name === "MongoWaitQueueTimeoutError") return true;
  if (RETRYABLE_LABELS.some((label) => error.hasErrorLabel(label))) return true;
  return typeof error.code === "number" && UNAVAILABLE_CODES.has(error.code);
}

function collectionsOf(db: Db) {
  return {
    teams: db.collection<TeamDocument>("teams"),
    keys: db.collection<ApiKeyDocument>("api_keys"),
    sessions: db.collection<SessionDocument>("sessions"),
    banners: db.collection<BannerDocument>("banners"),
    subjects: db.collection<SubjectDocument>("subjects"),
    consentLog: db.collection<ConsentLogDocument>("consent_log"),
    counters: db.collection<CounterDocument>("counters", COUNTER_OPTIONS),
    webhookEndpoints: db.collection<WebhookEndpointDocument>("webhook_endpoints"),
    webhookDeliveries: db.collection<DeliveryDocument>("webhook_deliveries"),
  };
}

/**
 * Unique indexes carry correctness (duplicate keys) and TTL indexes collect expired records.
 * Only the indexes a collection lacks are created (and those a release retired dropped), so a
 * start that finds them all writes nothing and comes up while a majority is away (a secondary
 * down beside an arbiter), serving what the primary can. A start that does build one (the first,
 * or the first of a release that adds one) waits for it: an index build commits once every
 * voting member that holds data has it (MongoDB's commitQuorum).
 */
async function createIndexes(client: MongoClient, dbName: string): Promise<void> {
  const collections = collectionsOf(client.db(dbName, { writeConcern: { w: 1 } }));
  await Promise.all([
    ensureIndexes(collections.teams, MongoTeamStore.indexes),
    ensureIndexes(collections.keys, MongoKeyStore.indexes),
    ensureIndexes(collections.sessions, MongoSessionStore.indexes),
    ensureIndexes(collections.banners, MongoBannerStore.indexes),
    ensureIndexes(collections.subjects, MongoSubjectStore.indexes),
    ensureIndexes(collections.consentLog, MongoConsentLogStore.indexes),
    ensureIndexes(collections.counters, MongoCounterStore.indexes),
    ensureIndexes(collections.webhookEndpoints, MongoWebhookStore.endpointIndexes),
    ensureIndexes(
      collections.webhookDeliveries,
      MongoWebhookStore.deliveryIndexes,
      MongoWebhookStore.retiredDeliveryIndexes,
    ),
  ]);
}

/** MongoDB's NamespaceNotFound: a collection not created yet has no indexes to list. */
const NAMESPACE_NOT_FOUND = 26;
/** MongoDB's IndexNotFound: another daemon starting at the same time dropped it first. */
const INDEX_NOT_FOUND = 27;

async function ensureIndexes<T extends Document>(
  collection: Collection<T>,
  indexes: IndexDescription[],
  retired: readonly string[] = [],
): Promise<void> {
  const existing = await collection
    .listIndexes()
    .toArray()
    .catch((error: unknown) => {
      if (error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND) return [];
      throw error;
    });
  const names = new Set(existing.map((index) => String(index.name)));
  const missing = indexes.filter((index) => !names.has(String(index.name)));
  if (missing.length > 0) await collection.createIndexes(missing);
  for (const name of retired) {
    if (!names.has(name)) continue;
    await collection.dropIndex(name).catch((error: unknown) => {
      // Daemons started together (a rolling upgrade) all list the retired index; one drops it.
      if (error instanceof MongoServerError && error.code === INDEX_NOT_FOUND) return;
      throw error;
    });
  }
}

/** An operator-readable connection failure; the host list only, never the URI's credentials. */
function connectionError(error: unknown, uri: string): Error {
  const hosts = uriParts(uri).hosts;
  const reason = messageOf(error);
  const message =
    error instanceof MongoServerSelectionError
      ? `MongoDB server could not be reached at ${hosts} within ${SERVER_SELECTION_TIMEOUT_MS / 1000} s: ${reason}`
      : `Could not connect to MongoDB at ${hosts}: ${reason}`;
  return new StartupError(message, { cause: error });
}

/**
 * The host list and database of a connection string, `scheme://[user:pass@]hosts[/database][?options]`.
 * Only called after the driver has parsed the URI, so the shape is known to be valid.
 */
function uriParts(uri: string): { hosts: string; database: string | undefined } {
  const afterScheme = uri.slice(uri.indexOf("://") + 3);
  const beforeOptions = afterScheme.split("?", 1)[0] ?? "";
  const slash = beforeOptions.indexOf("/");
  const hostsWithCredentials = slash < 0 ? beforeOptions : beforeOptions.slice(0, slash);
  const database = slash < 0 ? "" : decodeURIComponent(beforeOptions.slice(slash + 1));
  return {
    hosts: hostsWithCredentials.slice(hostsWithCredentials.lastIndexOf("@") + 1),
    database: database === "" ? undefined : database,
  };
}
