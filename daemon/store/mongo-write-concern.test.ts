import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { failureOf, useStandInDaemon } from "#test/support/stand-in-daemon.js";

/**
 * A team created through a daemon over the MongoDB adapter and a wire-protocol stand-in for the
 * server (mongo-wire-stand-in.ts) whose insert the primary applied but whose majority write
 * concern failed, which a real one-member replica set cannot be made to do.
 */

/** The daemon's warning for the store briefly out of reach, which passes by itself. */
const OUT_OF_REACH = "the store cannot be reached; calls fail with unavailable until it can";

/**
 * The operator's warning for a replica set that cannot provide a majority as configured: what is
 * wrong, and what they do about it.
 */
const TOO_FEW_DATA_BEARING_MEMBERS = expect.stringMatching(
  /^MongoDB's replica set cannot acknowledge majority writes \(UnsatisfiableWriteConcern\): its configuration has too few data-bearing members to make a majority; .* until the operator adds a data-bearing member to the set \(rs\.add\) or replaces an arbiter with one \(rs\.reconfig\)/,
);

/**
 * The write concern errors MongoDB reports beside a write the primary applied, with the
 * Retry-After each answers and the warning the daemon logs: minutes, and what the operator must
 * repair, for a set that cannot provide a majority until they do, as for a missing identity key;
 * a second, and the store out of reach, for one that passes by itself.
 */
const WRITE_CONCERN_FAILURES = [
  {
    writeConcernError: {
      code: 100,
      codeName: "UnsatisfiableWriteConcern",
      errmsg: "Not enough data-bearing nodes",
    },
    retryAfter: "300",
    warning: TOO_FEW_DATA_BEARING_MEMBERS,
  },
  {
    writeConcernError: {
      code: 64,
      codeName: "WriteConcernFailed",
      errmsg: "waiting for replication timed out",
    },
    retryAfter: "1",
    warning: OUT_OF_REACH,
  },
  {
    writeConcernError: {
      code: 91,
      codeName: "ShutdownInProgress",
      errmsg: "Replication is being shut down",
    },
    retryAfter: "1",
    warning: OUT_OF_REACH,
  },
  {
    writeConcernError: {
      code: 189,
      codeName: "PrimarySteppedDown",
      errmsg: "Primary stepped down while waiting",
    },
    retryAfter: "1",
    warning: OUT_OF_REACH,
  },
  {
    writeConcernError: {
      code: 11602,
      codeName: "InterruptedDueToReplStateChange",
      errmsg: "operation was interrupted",
    },
    retryAfter: "1",
    warning: OUT_OF_REACH,
  },
  {
    writeConcernError: {
      code: 50,
      codeName: "MaxTimeMSExpired",
      errmsg: "operation exceeded time limit",
    },
    retryAfter: "1",
    warning: OUT_OF_REACH,
  },
];

describe("a write whose write concern MongoDB could not satisfy", () => {
  const daemon = useStandInDaemon();
  it.each(WRITE_CONCERN_FAILURES)(
    "answers 503 unavailable with Retry-After $retryAfter and logs a warning of its cause ($writeConcernError.codeName)",
    async ({ writeConcernError, retryAfter, warning }) => {
      const database = emptyDatabase(undefined, {
        insert: (command) => ({ n: command.documents.length, ok: 1, writeConcernError }),
      });
      const running = await daemon.start(database);
      const client = createClient(
        AdminService,
        createGrpcTransport({ baseUrl: running.daemonUrl }),
      );
      expect(
        await failureOf(client.createTeam({ name: "Acme", plan: "free" }, daemon.asOperator)),
      ).toEqual({
        code: Code.Unavailable,
        errorCode: "unavailable",
        message: "The store is temporarily unavailable; retry later",
        retryAfter,
      });
      // A warning naming the server's reason, not an error line of a failure in the service;
      // the client's answer above says nothing of it (spec 7's generic `unavailable`).
      expect(running.logs).toEqual([
        expect.objectContaining({
          level: 40,
          msg: warning,
          // A step-down's codes also carry the driver's label ResetPool.
          storeError: expect.objectContaining({
            name: "MongoWriteConcernError",
            code: writeConcernError.code,
            codeName: writeConcernError.codeName,
            message: writeConcernError.errmsg,
          }),
        }),
      ]);
      expect(running.logs[0]).not.toHaveProperty("err");
      expect(running.logs[0]).not.toHaveProperty("storeError.stack");
    },
  );
});
