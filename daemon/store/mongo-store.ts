import {
  type CollectionOptions,
  type Db,
  type DbOptions,
  MongoClient,
  type MongoClientOptions,
  MongoServerSelectionError,
  ReadConcern,
} from "mongodb";
import { type BannerDocument, MongoBannerStore } from "#daemon/banners/mongo-banner-store.js";
import { CLOCK_SKEW_MS } from "#daemon/clock.js";
import { StartupError } from "#daemon/config.js";
import {
  type ConsentLogDocument,
  MongoConsentLogStore,
} from "#daemon/consent-log/mongo-consent-log-store.js";
import { messageOf } from "#daemon/errors.js";
import { type ApiKeyDocument, MongoKeyStore } from "#daemon/keys/mongo-key-store.js";
import { type CounterDocument, MongoCounterStore } from "#daemon/limits/mongo-counter-store.js";
import { MongoSessionStore, type SessionDocument } from "#daemon/sessions/mongo-session-store.js";
import { type CollectionIndexes, ensureIndexes } from "#daemon/store/mongo-indexes.js";
import { type MongoTimeouts, mongoTimeouts } from "#daemon/store/mongo-timeouts.js";
import {
  connectedToUninitiatedMember,
  serverKind,
  standaloneWarning,
  topologyMismatch,
  watchServers,
} from "#daemon/store/mongo-topology.js";
import { mongoUnavailability } from "#daemon/store/mongo-unavailable.js";
import { driverWordsWithoutSecrets, shownMongoUri } from "#daemon/store/mongo-uri-secrets.js";
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
  /** CONSENT_MONGODB_TIMEOUT_MS, the bound of each wait of a command (mongo-timeouts.ts). */
  timeoutMs?: number;
}

/**
 * Several daemons and gateways share one database (decisions §1), and an acknowledged write (a
 * consent log row, a subject version, a revocation) must survive a primary failover, so writes
 * wait for a journaled majority, at most `serverMs`: past it the request fails (503 unavailable,
 * nothing acknowledged) instead of hanging while the primary is up but a majority is not (a
 * secondary down beside an arbiter); the write itself may still complete on the server. Reads go
 * to the primary with read concern majority: they never return data a failover could roll back,
 * and never lag behind a write on a secondary.
 *
 * The concerns are set on the database, where the URI's own settings cannot weaken them: a
 * client's options give way to `?journal=false` or `?readConcernLevel=local` in the URI, a
 * database's do not.
 */
function dbOptions(timeouts: MongoTimeouts): DbOptions {
  return {
    writeConcern: { w: "majority", journal: true, wtimeoutMS: timeouts.serverMs },
    readConcern: new ReadConcern("majority"),
    readPreference: "primary",
  };
}

/**
 * The client's options, which override the URI's. Every wait of a command is bounded
 * (mongo-timeouts.ts): finding the primary, a pooled connection (all of them busy with a stalled
 * server), and the reply. A primary that stops answering (a network partition, a stalled server)
 * fails each command within `commandMs`, and its request with 503, instead of holding it.
 * retryWrites/retryReads ride out an election or a dropped connection for every read and every
 * single-document write (bulk fan-out upserts included). The multi-document writes (a replay's
 * updateMany, the purges' and an endpoint's deliveries' deleteMany) are not retryable: an
 * election in the middle of one fails it to its caller.
 */
export function mongoClientOptions(timeouts: MongoTimeouts): MongoClientOptions {
  return {
    ...dbOptions(timeouts),
    serverSelectionTimeoutMS: timeouts.selectionMs,
    waitQueueTimeoutMS: timeouts.checkoutMs,
    socketTimeoutMS: timeouts.replyMs,
    retryWrites: true,
    retryReads: true,
    // An overloaded server's refusal answers 503 with Retry-After at once (spec 7), rather than
    // holding the request through the driver's backoffs.
    maxAdaptiveRetries: 0,
    // The stores read numbers as numbers and binary data as the driver's Binary: a URI asking
    // for other BSON types (promoteValues=false, useBigInt64=true…) would break every read.
    promoteValues: true,
    promoteLongs: true,
    promoteBuffers: false,
    useBigInt64: false,
    bsonRegExp: false,
    appName: "consent-service",
  };
}

/** The service's database, with the concerns every collection but the counters' is written with. */
export function serviceDb(client: MongoClient, dbName: string, timeouts = mongoTimeouts()): Db {
  return client.db(dbName, dbOptions(timeouts));
}

/**
 * The rate-limit counters are written by every authenticated request, reads included, and hold
 * only the current windows, so they are written as the embedded store writes them (without
 * fsync, lmdb-store.ts): acknowledged by the primary alone, unjournaled, and read from it as it
 * stands. A primary without a majority (a secondary down beside an arbiter) then still serves
 * every read and every write whose own write concern can be met, instead of failing each request
 * after its majority wait; a failover may lose the counts of the last moments, which at worst lets
 * a few requests more through in that window.
 */
const COUNTER_OPTIONS: CollectionOptions = {
  writeConcern: { w: 1, journal: false },
  readConcern: { level: "local" },
};

/**
 * Connects to MongoDB, creates the indexes the adapters rely on that the database lacks
 * (mongo-indexes.ts) and returns the Store. Fails with a readable StartupError, the driver's as
 * cause, when the server cannot be reached within the selection bound, refuses the indexes, or
 * holds an index of the service's defined otherwise, or one in the way of building it.
 */
export async function openMongoStore(options: MongoStoreOptions): Promise<Store> {
  const timeouts = mongoTimeouts(options.timeoutMs);
  let client: MongoClient;
  try {
    client = new MongoClient(options.uri, mongoClientOptions(timeouts));
  } catch (error) {
    // The driver's parse errors name the part they could not read, a malformed user name
    // included: the connection string and those words are repeated without its user info or
    // the values of its secret options (a key's password, the proxy's, a session token).
    throw new StartupError(
      `MONGODB_URI ("${shownMongoUri(options.uri)}") is not a connection string MongoDB accepts: ${driverWordsWithoutSecrets(options.uri, messageOf(error))}`,
      { cause: error },
    );
  }
  const servers = watchServers(client);
  try {
    await client.connect();
  } catch (error) {
    await client.close();
    throw connectionError(
      error,
      options.uri,
      timeouts,
      topologyMismatch(servers, client.options.replicaSet, timeouts.selectionMs),
    );
  } finally {
    servers.stop();
  }
  try {
    const uninitiated = connectedToUninitiatedMember(servers);
    if (uninitiated) throw new StartupError(uninitiated);
    const dbName = options.dbName ?? uriParts(options.uri).database ?? "consent";
    const db = serviceDb(client, dbName, timeouts);
    await checkServerVersion(db, options.uri);
    const standalone = serverKind(await db.command({ hello: 1 })) === "standalone";
    const startWarnings = standalone ? [standaloneWarning(uriParts(options.uri).hosts)] : [];
    const marker = await db
      .collection<{ _id: string; value: unknown }>("meta")
      .findOne({ _id: "format" });
    try {
      checkStoreFormat(marker?.value);
    } catch (error) {
      throw new StartupError(`cannot use the MongoDB database ${dbName}: ${messageOf(error)}`);
    }
    const store = createStore(client, db, timeouts, startWarnings);
    try {
      // Indexes are created and dropped with w:1, so a restart comes up while a majority is away.
      await ensureIndexes(client.db(dbName, INDEX_DB_OPTIONS), indexesOf(), async () => {
        const builder = await MongoClient.connect(options.uri, {
          ...mongoClientOptions(timeouts),
          socketTimeoutMS: 0,
        });
        return { db: builder.db(dbName, INDEX_DB_OPTIONS), close: () => builder.close() };
      });
    } catch (error) {
      if (error instanceof StartupError) throw error;
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

/**
 * The oldest MongoDB release the service runs on (README, "MongoDB"). Earlier servers, which the
 * driver still connects to, refuse field names a banner's configuration or a consent state may
 * hold (a '.', a leading '$'), so a start there would fail those writes one by one later.
 */
const MIN_SERVER_MAJOR = 5;

/** Refuses a server older than MIN_SERVER_MAJOR, naming its version; one it cannot tell passes. */
async function checkServerVersion(db: Db, uri: string): Promise<void> {
  const info = await db.command({ buildInfo: 1 });
  const version = typeof info.version === "string" ? info.version : undefined;
  const major = Array.isArray(info.versionArray)
    ? Number(info.versionArray[0])
    : Number.parseInt(version ?? "", 10);
  if (Number.isInteger(major) && major < MIN_SERVER_MAJOR) {
    throw new StartupError(
      `MongoDB at ${uriParts(uri).hosts} is version ${version ?? major}; this service needs MongoDB ${MIN_SERVER_MAJOR}.0 or later, whose field-name rules a banner's configuration and a consent state rely on`,
    );
  }
}

function createStore(
  client: MongoClient,
  db: Db,
  timeouts: MongoTimeouts,
  startWarnings: readonly string[],
): Store {
  const collections = collectionsOf(db);
  return {
    kind: "mongodb",
    teams: new MongoTeamStore(collections.teams),
    keys: new MongoKeyStore(collections.keys),
    sessions: new MongoSessionStore(collections.sessions),
    banners: new MongoBannerStore(collections.banners),
    subjects: new MongoSubjectStore(collections.subjects, client),
    consentLog: new MongoConsentLogStore(collections.consentLog, {
      // An append is acknowledged within one command's bound of its id's time, or fails (503);
      // its row is readable once acknowledged (read concern majority). Each daemon takes a
      // row's id from its own clock: a tail meets another daemon's rows as late as clocks differ.
      lateRowsMs: timeouts.commandMs + CLOCK_SKEW_MS,
      maxTimeMS: timeouts.serverMs,
    }),
    counters: new MongoCounterStore(collections.counters),
    webhooks: new MongoWebhookStore(
      collections.webhookEndpoints,
      collections.webhookDeliveries,
      collections.consentLog,
    ),
    acceptsWrites: () => true,
    startWarnings,
    unavailability: mongoUnavailability,
    isDamage: () => false,
    reportDamage: () => {},
    refreshReads: () => {},
    async ping() {
      await db.command({ ping: 1 });
    },
    async close() {
      await client.close();
    },
  };
}

/** The collection of each adapter. */
const COLLECTIONS = {
  teams: "teams",
  keys: "api_keys",
  sessions: "sessions",
  banners: "banners",
  subjects: "subjects",
  consentLog: "consent_log",
  counters: "counters",
  webhookEndpoints: "webhook_endpoints",
  webhookDeliveries: "webhook_deliveries",
} as const;

function collectionsOf(db: Db) {
  return {
    teams: db.collection<TeamDocument>(COLLECTIONS.teams),
    keys: db.collection<ApiKeyDocument>(COLLECTIONS.keys),
    sessions: db.collection<SessionDocument>(COLLECTIONS.sessions),
    banners: db.collection<BannerDocument>(COLLECTIONS.banners),
    subjects: db.collection<SubjectDocument>(COLLECTIONS.subjects),
    consentLog: db.collection<ConsentLogDocument>(COLLECTIONS.consentLog),
    counters: db.collection<CounterDocument>(COLLECTIONS.counters, COUNTER_OPTIONS),
    webhookEndpoints: db.collection<WebhookEndpointDocument>(COLLECTIONS.webhookEndpoints),
    webhookDeliveries: db.collection<DeliveryDocument>(COLLECTIONS.webhookDeliveries),
  };
}

/** Where start-up lists, creates and drops indexes: w:1 (see ensureIndexes). */
const INDEX_DB_OPTIONS: DbOptions = { writeConcern: { w: 1 } };

/** The indexes each adapter relies on, by collection (ensureIndexes). */
function indexesOf(): CollectionIndexes[] {
  return [
    { collection: COLLECTIONS.teams, indexes: MongoTeamStore.indexes },
    { collection: COLLECTIONS.keys, indexes: MongoKeyStore.indexes },
    { collection: COLLECTIONS.sessions, indexes: MongoSessionStore.indexes },
    { collection: COLLECTIONS.banners, indexes: MongoBannerStore.indexes },
    { collection: COLLECTIONS.subjects, indexes: MongoSubjectStore.indexes },
    { collection: COLLECTIONS.consentLog, indexes: MongoConsentLogStore.indexes },
    { collection: COLLECTIONS.counters, indexes: MongoCounterStore.indexes },
    { collection: COLLECTIONS.webhookEndpoints, indexes: MongoWebhookStore.endpointIndexes },
    {
      collection: COLLECTIONS.webhookDeliveries,
      indexes: MongoWebhookStore.deliveryIndexes,
      retired: MongoWebhookStore.retiredDeliveryIndexes,
    },
  ];
}

/**
 * An operator-readable connection failure; the host list only, never the URI's credentials. A
 * server that answered but does not fit the deployment the URI names (`mismatch`,
 * topologyMismatch) is what the line says, rather than a server out of reach.
 */
function connectionError(
  error: unknown,
  uri: string,
  timeouts: MongoTimeouts,
  mismatch: string | undefined,
): Error {
  const hosts = uriParts(uri).hosts;
  const reason = messageOf(error);
  const message = !(error instanceof MongoServerSelectionError)
    ? `Could not connect to MongoDB at ${hosts}: ${reason}`
    : (mismatch ??
      `MongoDB server could not be reached at ${hosts} within ${timeouts.selectionMs / 1000} s: ${reason}`);
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
