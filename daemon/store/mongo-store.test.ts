import { createRequire } from "node:module";
import {
  BSON,
  type Document,
  Double,
  MongoBulkWriteError,
  MongoClient,
  MongoClientClosedError,
  MongoNetworkTimeoutError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  MongoWriteConcernError,
} from "mongodb";
import { describe, expect, it } from "vitest";
import { loadConfig } from "#daemon/config.js";
import { indexConflict } from "#daemon/store/mongo-indexes.js";
import { mongoClientOptions, serviceDb } from "#daemon/store/mongo-store.js";
import { mongoTimeouts } from "#daemon/store/mongo-timeouts.js";
import { isMongoUnavailable } from "#daemon/store/mongo-unavailable.js";
import { DuplicateKeyError } from "#daemon/store/store.js";

/**
 * The driver's pool errors, which it throws but does not export: its own classes, from the
 * module that defines them (the same module instances the driver itself loaded).
 */
const { WaitQueueTimeoutError, PoolClearedError, PoolClosedError } = createRequire(import.meta.url)(
  "mongodb/lib/cmap/errors.js",
) as {
  WaitQueueTimeoutError: new (message: string, address: string) => Error;
  PoolClearedError: new (pool: { address: string }, message?: string) => Error;
  PoolClosedError: new (pool: { address: string }) => Error;
};

/**
 * The driver's own judgement of server codes (node_modules/mongodb/src/error.ts), which it
 * defines but does not export from its entry point: the codes it retries a read or a write after
 * (isRetryableReadError; its retryable write codes are the same set), those of a member not
 * primary or recovering (isStateChangeError), and those its change streams resume after.
 */
const driverErrors = createRequire(import.meta.url)("mongodb/lib/error.js") as {
  MONGODB_ERROR_CODES: Record<string, number>;
  GET_MORE_RESUMABLE_CODES: Set<number>;
  isRetryableReadError: (error: MongoServerError) => boolean;
  isStateChangeError: (error: MongoServerError) => boolean;
};

describe("isMongoUnavailable: which driver errors answer 503 unavailable", () => {
  it("takes every code the driver retries after, or takes for a member not primary or recovering, or resumes a cursor after but a lost cursor, for unavailable", () => {
    const { MONGODB_ERROR_CODES, GET_MORE_RESUMABLE_CODES } = driverErrors;
    // A cursor the server no longer has, and a change stream's own signal (the service opens
    // none), are no outage.
    const notOutages = [MONGODB_ERROR_CODES.CursorNotFound, MONGODB_ERROR_CODES.RetryChangeStream];
    const codes = Object.values(MONGODB_ERROR_CODES).filter((code) => {
      const error = new MongoServerError({ code, errmsg: "server error" });
      return (
        driverErrors.isRetryableReadError(error) ||
        driverErrors.isStateChangeError(error) ||
        (GET_MORE_RESUMABLE_CODES.has(code) && !notOutages.includes(code))
      );
    });
    expect(codes).toEqual(expect.arrayContaining([13388, 150, 63, 189, 13436, 91, 10107]));
    const missed = codes.filter(
      (code) => !isMongoUnavailable(new MongoServerError({ code, errmsg: "server error" })),
    );
    expect(missed).toEqual([]);
  });

  it("takes a lost connection, no reachable primary and a closed client for unavailable", () => {
    expect(isMongoUnavailable(new MongoNetworkTimeoutError("connection timed out"))).toBe(true);
    expect(isMongoUnavailable(new MongoServerSelectionError("no primary", {} as never))).toBe(true);
    expect(isMongoUnavailable(new MongoTopologyClosedError())).toBe(true);
    // A command in flight when the store closes.
    expect(isMongoUnavailable(new MongoClientClosedError())).toBe(true);
  });

  it("takes a replica set between primaries and a majority that did not answer for unavailable", () => {
    const notPrimary = new MongoServerError({ code: 10107, errmsg: "not primary" });
    expect(isMongoUnavailable(notPrimary)).toBe(true);
    const steppedDown = new MongoServerError({ code: 11602, errmsg: "interrupted" });
    expect(isMongoUnavailable(steppedDown)).toBe(true);
    const waited = new MongoWriteConcernError({
      ok: 1,
      writeConcernError: {
        code: 64,
        errmsg: "waiting for replication timed out",
        errInfo: { wtimeout: true },
      },
    });
    expect(isMongoUnavailable(waited)).toBe(true);
    // mongos while a shard elects its primary.
    for (const code of [133, 202]) {
      expect(isMongoUnavailable(new MongoServerError({ code, errmsg: "shard" }))).toBe(true);
    }
    const labelled = new MongoServerError({ code: 1, errmsg: "transient" });
    labelled.addErrorLabel("RetryableWriteError");
    expect(isMongoUnavailable(labelled)).toBe(true);
  });

  it("takes a request that waited too long for a pooled connection for unavailable", () => {
    const waited = new WaitQueueTimeoutError("Timed out while checking out", "db1:27017");
    expect(isMongoUnavailable(waited)).toBe(true);
    expect(isMongoUnavailable(new PoolClearedError({ address: "db1:27017" }, "cleared"))).toBe(
      true,
    );
    // The store closing while a command waited for a pooled connection.
    expect(isMongoUnavailable(new PoolClosedError({ address: "db1:27017" }))).toBe(true);
  });

  it("takes a lost connection or no primary met by a bulk write for unavailable", () => {
    // bulkWrite wraps each driver error in a MongoBulkWriteError with the original as
    // errorResponse (the result, which the driver does not export a way to build, is not read).
    const result = {} as never;
    const wrapped = (error: Error) => new MongoBulkWriteError(error as never, result);
    expect(
      isMongoUnavailable(wrapped(new MongoServerSelectionError("no primary", {} as never))),
    ).toBe(true);
    expect(isMongoUnavailable(wrapped(new MongoNetworkTimeoutError("timed out")))).toBe(true);
    expect(isMongoUnavailable(wrapped(new MongoTopologyClosedError()))).toBe(true);
    const duplicate = wrapped(new MongoServerError({ code: 11000, errmsg: "E11000" }));
    expect(isMongoUnavailable(duplicate)).toBe(false);
  });

  it("takes every bound that passed for unavailable: the reply's, the server's run time, the selection's", () => {
    // socketTimeoutMS: a primary that stopped answering.
    const silent = new MongoNetworkTimeoutError("connection 3 to 10.0.0.5:27017 timed out");
    expect(isMongoUnavailable(silent)).toBe(true);
    // maxTimeMS of a bounded read (a consent record's latest choice), which the server stopped;
    // a consent log read of a range is LogReadTooLargeError (mongo-consent-log-store.ts) instead.
    const stopped = new MongoServerError({
      code: 50,
      codeName: "MaxTimeMSExpired",
      errmsg: "operation exceeded time limit",
    });
    expect(isMongoUnavailable(stopped)).toBe(true);
    expect(isMongoUnavailable(new MongoServerSelectionError("timed out", {} as never))).toBe(true);
    // The driver's single operation bound, should a later driver bring it back.
    expect(isMongoUnavailable(new MongoOperationTimeoutError("Timed out"))).toBe(true);
  });

  it("leaves refusals and every other error to their own answers", () => {
    expect(isMongoUnavailable(new MongoServerError({ code: 11000, errmsg: "E11000" }))).toBe(false);
    expect(isMongoUnavailable(new MongoServerError({ code: 13, errmsg: "unauthorized" }))).toBe(
      false,
    );
    expect(isMongoUnavailable(new DuplicateKeyError("publicId"))).toBe(false);
    expect(isMongoUnavailable(new Error("ECONNRESET"))).toBe(false);
  });
});

describe("mongoClientOptions: every wait of a command is bounded", () => {
  it("bounds a reply, a pooled connection and the primary's selection by CONSENT_MONGODB_TIMEOUT_MS, and reads BSON as the stores expect, whatever the URI says", async () => {
    const config = loadConfig({
      MONGODB_URI: "mongodb://127.0.0.1:1/shop",
      CONSENT_MONGODB_TIMEOUT_MS: "4000",
    });
    const timeouts = mongoTimeouts(config.mongoTimeoutMs);
    // Not connected: the options are the driver's, resolved when the client is made.
    const client = new MongoClient(
      `${config.mongoUri}?socketTimeoutMS=0&waitQueueTimeoutMS=0&serverSelectionTimeoutMS=60000&maxAdaptiveRetries=5&promoteValues=false&promoteLongs=false&useBigInt64=true&promoteBuffers=true&bsonRegExp=true`,
      mongoClientOptions(timeouts),
    );
    expect(client.options).toMatchObject({
      // The BSON types the stores read, whatever the URI asks for.
      promoteValues: true,
      promoteLongs: true,
      promoteBuffers: false,
      useBigInt64: false,
      bsonRegExp: false,
      socketTimeoutMS: 8_000,
      waitQueueTimeoutMS: 4_000,
      serverSelectionTimeoutMS: 4_000,
      maxAdaptiveRetries: 0,
      retryReads: true,
      retryWrites: true,
    });
    expect(serviceDb(client, "shop", timeouts).writeConcern?.wtimeoutMS).toBe(4_000);
    // Two attempts of: a primary, a connection, a reply.
    expect(timeouts.commandMs).toBe(2 * (4_000 + 4_000 + 8_000));
    await client.close();
  });

  it("waits 10 s by default: a primary within 5 s, a reply within 15 s", () => {
    const timeouts = mongoTimeouts(loadConfig({}).mongoTimeoutMs);
    expect(timeouts).toMatchObject({
      selectionMs: 5_000,
      checkoutMs: 10_000,
      serverMs: 10_000,
      replyMs: 15_000,
      commandMs: 60_000,
    });
  });
});

describe("indexConflict: an index found under a name this version uses", () => {
  const keyHash = { key: { keyHash: 1 }, name: "api_keys_key_hash", unique: true };

  it("is this version's when it serves as defined, whatever the server adds or the filter's order", () => {
    expect(indexConflict({ v: 2, ...keyHash, background: true }, keyHash)).toBeUndefined();
    const partial = {
      key: { dueAt: 1, webhookId: 1 },
      name: "due",
      partialFilterExpression: { status: "pending", kind: "x" },
    };
    const listed = { ...partial, partialFilterExpression: { kind: "x", status: "pending" } };
    expect(indexConflict({ v: 2, ...listed }, partial)).toBeUndefined();
  });

  it("says what differs: keys, their order, uniqueness, the TTL, a collation, hiding", () => {
    expect(indexConflict({ key: { keyHash: 1 }, name: keyHash.name }, keyHash)).toBe(
      'is {"keyHash":1} but this version needs {"keyHash":1}, unique',
    );
    const byTeam = { key: { teamId: 1, _id: -1 }, name: "by_team" };
    expect(indexConflict({ key: { _id: -1, teamId: 1 }, name: "by_team" }, byTeam)).toBe(
      'is {"_id":-1,"teamId":1} but this version needs {"teamId":1,"_id":-1}',
    );
    const ttl = { key: { expiresAt: 1 }, name: "expiry", expireAfterSeconds: 0 };
    expect(indexConflict({ ...ttl, expireAfterSeconds: 3600 }, ttl)).toBe(
      'is {"expiresAt":1}, expireAfterSeconds 3600 but this version needs {"expiresAt":1}, expireAfterSeconds 0',
    );
    expect(indexConflict({ ...keyHash, collation: { locale: "fr" } }, keyHash)).toMatch(
      /collation \{"locale":"fr"\} but/,
    );
    expect(indexConflict({ ...keyHash, hidden: true }, keyHash)).toMatch(/unique, hidden but/);
  });

  // Definitions as this version writes them (the adapters' IndexDescriptions).
  const slot = {
    key: { teamId: 1, slot: 1 },
    name: "banners_slot",
    unique: true,
    partialFilterExpression: { slot: { $exists: true } },
  };
  const due = {
    key: { dueAt: 1, webhookId: 1, teamId: 1 },
    name: "webhook_deliveries_due_by_endpoint",
    partialFilterExpression: { status: "pending" },
  };
  const expiry = { key: { expiresAt: 1 }, name: "sessions_expiry", expireAfterSeconds: 0 };
  const byTeam = { key: { teamId: 1, createdAt: -1, _id: 1 }, name: "sessions_team" };

  /** A listing as the driver hands it over: through BSON, with the client's options. */
  const received = (listed: Document) => BSON.deserialize(BSON.serialize(listed));

  it("takes listIndexes documents of servers from 4.2 on for this version's, as created by it", () => {
    // MongoDB 4.2 lists the namespace and the build option; later servers neither.
    const listed42 = {
      v: 2,
      unique: true,
      key: { teamId: 1, slot: 1 },
      name: "banners_slot",
      ns: "consent.banners",
      partialFilterExpression: { slot: { $exists: true } },
      background: true,
    };
    expect(indexConflict(received(listed42), slot)).toBeUndefined();
    const listed70 = {
      v: 2,
      key: { expiresAt: 1 },
      name: "sessions_expiry",
      expireAfterSeconds: 0,
    };
    expect(indexConflict(received(listed70), expiry)).toBeUndefined();
    const listedDue = {
      v: 2,
      key: due.key,
      name: due.name,
      partialFilterExpression: { status: "pending" },
    };
    expect(indexConflict(received(listedDue), due)).toBeUndefined();
  });

  it("takes directions and a TTL listed as doubles, as mongosh creates them, for the integers they equal", () => {
    const doubles = {
      v: 2,
      key: { teamId: new Double(1), createdAt: new Double(-1), _id: new Double(1) },
      name: "sessions_team",
    };
    expect(indexConflict(received(doubles), byTeam)).toBeUndefined();
    const ttl = { v: 2, key: { expiresAt: new Double(1) }, name: expiry.name };
    expect(
      indexConflict(received({ ...ttl, expireAfterSeconds: new Double(0) }), expiry),
    ).toBeUndefined();
  });

  it("takes a flag listed false for one left out", () => {
    const off = { ...byTeam, v: 2, unique: false, sparse: false, hidden: false };
    expect(indexConflict(received(off), byTeam)).toBeUndefined();
  });

  it("passes over what a server adds to a listing: v, ns, background, text and 2dsphere versions", () => {
    const added = {
      ...byTeam,
      v: 1,
      ns: "consent.sessions",
      background: false,
      textIndexVersion: 3,
      "2dsphereIndexVersion": 3,
      prepareUnique: false,
      storageEngine: {},
    };
    expect(indexConflict(received(added), byTeam)).toBeUndefined();
  });

  it("takes a partial filter in another field order, or with $eq spelt out", () => {
    const both = { ...due, partialFilterExpression: { status: "pending", attempt: { $gte: 1 } } };
    const reordered = {
      v: 2,
      ...due,
      partialFilterExpression: { attempt: { $gte: 1 }, status: { $eq: "pending" } },
    };
    expect(indexConflict(received(reordered), both)).toBeUndefined();
  });

  it("takes the simple collation for none, and any other for one this version does not define", () => {
    expect(indexConflict({ ...byTeam, collation: { locale: "simple" } }, byTeam)).toBeUndefined();
    const listed = {
      v: 2,
      ...byTeam,
      collation: { locale: "fr", strength: 2, caseLevel: false, version: "57.1" },
    };
    expect(indexConflict(received(listed), byTeam)).toMatch(
      /^is \{"teamId":1,"createdAt":-1,"_id":1\}, collation \{"locale":"fr",.* but this version needs \{"teamId":1,"createdAt":-1,"_id":1\}$/,
    );
  });

  it("still tells a real difference: a direction, the TTL, uniqueness, sparseness, the filter", () => {
    const reversed = { v: 2, ...byTeam, key: { teamId: 1, createdAt: 1, _id: 1 } };
    expect(indexConflict(received(reversed), byTeam)).toBe(
      'is {"teamId":1,"createdAt":1,"_id":1} but this version needs {"teamId":1,"createdAt":-1,"_id":1}',
    );
    // Any positive number is ascending, but the server tells { a: 2 } from { a: 1 } (a hint too).
    const two = { ...expiry, key: { expiresAt: 2 } };
    expect(indexConflict(received(two), expiry)).toMatch(/^is \{"expiresAt":2\}/);
    const { expireAfterSeconds: _ttl, ...noTtl } = expiry;
    expect(indexConflict(received({ v: 2, ...noTtl }), expiry)).toMatch(
      /^is \{"expiresAt":1\} but/,
    );
    expect(indexConflict(received({ ...slot, unique: false }), slot)).toMatch(
      /^is \{"teamId":1,"slot":1\}, partial/,
    );
    expect(indexConflict({ ...byTeam, sparse: true }, byTeam)).toMatch(/, sparse but/);
    const { partialFilterExpression: _filter, ...whole } = due;
    expect(indexConflict(received(whole), due)).toMatch(/^is \{[^}]*\} but .*partial/);
    const sent = { ...due, partialFilterExpression: { status: "sent" } };
    expect(indexConflict(received(sent), due)).toBe(
      'is {"dueAt":1,"webhookId":1,"teamId":1}, partial {"status":"sent"} but this version needs {"dueAt":1,"webhookId":1,"teamId":1}, partial {"status":"pending"}',
    );
    const absent = { ...slot, partialFilterExpression: { slot: { $exists: false } } };
    expect(indexConflict(received(absent), slot)).toMatch(
      /partial \{"slot":\{"\$exists":false\}\} but/,
    );
  });
});

describe("serviceDb: the concerns acknowledged writes and reads rely on", () => {
  it("keeps journaled majority writes and majority reads whatever the URI asks", async () => {
    // Not connected: the options are the driver's, resolved when the handles are made.
    const client = new MongoClient(
      "mongodb://127.0.0.1:1/shop?journal=false&w=1&readConcernLevel=local&readPreference=secondary",
    );
    const logs = serviceDb(client, "shop").collection("consent_log");
    expect(logs.writeConcern).toMatchObject({ w: "majority", journal: true, wtimeoutMS: 10_000 });
    expect(logs.readConcern?.level).toBe("majority");
    expect(logs.readPreference?.mode).toBe("primary");
    await client.close();
  });
});
