import {
  MongoBulkWriteError,
  MongoClient,
  MongoDriverError,
  MongoNetworkTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  MongoWriteConcernError,
} from "mongodb";
import { describe, expect, it } from "vitest";
import { isMongoUnavailable, serviceDb } from "#daemon/store/mongo-store.js";
import { DuplicateKeyError } from "#daemon/store/store.js";

describe("isMongoUnavailable: which driver errors answer 503 unavailable", () => {
  it("takes a lost connection, no reachable primary and a closed client for unavailable", () => {
    expect(isMongoUnavailable(new MongoNetworkTimeoutError("connection timed out"))).toBe(true);
    expect(isMongoUnavailable(new MongoServerSelectionError("no primary", {} as never))).toBe(true);
    expect(isMongoUnavailable(new MongoTopologyClosedError())).toBe(true);
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
    // The driver's WaitQueueTimeoutError, which it does not export, as it names itself.
    class WaitQueueTimeout extends MongoDriverError {
      override get name() {
        return "MongoWaitQueueTimeoutError";
      }
    }
    expect(isMongoUnavailable(new WaitQueueTimeout("timed out waiting for a connection"))).toBe(
      true,
    );
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

  it("leaves refusals and every other error to their own answers", () => {
    expect(isMongoUnavailable(new MongoServerError({ code: 11000, errmsg: "E11000" }))).toBe(false);
    expect(isMongoUnavailable(new MongoServerError({ code: 13, errmsg: "unauthorized" }))).toBe(
      false,
    );
    expect(isMongoUnavailable(new DuplicateKeyError("publicId"))).toBe(false);
    expect(isMongoUnavailable(new Error("ECONNRESET"))).toBe(false);
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
