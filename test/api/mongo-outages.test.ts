import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { loadConfig } from "#daemon/config.js";
import { generateApiKey } from "#daemon/keys/api-key-format.js";
import { cursorReply, emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { startGateway } from "#gateway/main.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { failureOf, type StandInDaemon, useStandInDaemon } from "#test/support/stand-in-daemon.js";

/**
 * Server error codes of a replica set or a sharded cluster briefly unable to serve, which the
 * driver hands on without a retry (no RetryableWriteError label), answered by a daemon over the
 * MongoDB adapter and a wire-protocol stand-in for the server (mongo-wire-stand-in.ts): a real
 * server cannot be made to answer them on demand.
 */
const PASSING_SERVER_ERRORS = [
  { code: 94, codeName: "NotYetInitialized", errmsg: "no replset config has been received" },
  {
    code: 211,
    codeName: "KeyNotFound",
    errmsg: "Cache Reader No keys found for HMAC that is valid for time",
  },
  { code: 13388, codeName: "StaleConfig", errmsg: "shard version not ok" },
  { code: 150, codeName: "StaleEpoch", errmsg: "epoch mismatch" },
  { code: 63, codeName: "StaleShardVersion", errmsg: "shard version not ok" },
  // A router whose record of the database's primary shard is behind a movePrimary.
  { code: 249, codeName: "StaleDbVersion", errmsg: "database version mismatch" },
  {
    code: 319,
    codeName: "MovePrimaryInProgress",
    errmsg: "movePrimary is in progress for namespace shop.teams",
  },
  { code: 365, codeName: "TemporarilyUnavailable", errmsg: "cache eviction pressure" },
  { code: 402, codeName: "ResourceExhausted", errmsg: "resource exhausted" },
  {
    code: 407,
    codeName: "PooledConnectionAcquisitionExceededTimeLimit",
    errmsg: "timed out waiting for a connection to a shard",
  },
  {
    code: 453,
    codeName: "InterruptedDueToReshardingCriticalSection",
    errmsg: "interrupted due to resharding",
  },
  { code: 10045600, codeName: "InterruptedDueToFCVChange", errmsg: "interrupted due to FCV" },
  { code: 216, codeName: "ElectionInProgress", errmsg: "election in progress" },
  {
    code: 355,
    codeName: "InterruptedDueToStorageChange",
    errmsg: "operation was interrupted because the storage engine changed",
  },
  // A command killed by an operator (db.killOp(), killSessions) or by the server.
  { code: 11601, codeName: "Interrupted", errmsg: "operation was interrupted" },
  { code: 46841, codeName: "ClientMarkedKilled", errmsg: "operation was interrupted" },
  // mongos without its config server replica set.
  {
    code: 56846,
    codeName: "ConfigServerUnreachable",
    errmsg: "unable to reach the config server replica set",
  },
];

/** The warnings of their own, by code: the words the operator reads (mongo-unavailable.ts). */
const OWN_WARNINGS: Record<number, RegExp> = {
  211: /^MongoDB cannot validate the cluster time the daemon sends \(KeyNotFound\): .*if it lasts, .*until the daemon is restarted$/,
  11601:
    /^MongoDB killed a command of the daemon \(Interrupted or ClientMarkedKilled\): an operator \(db\.killOp\(\), killSessions\) or the server stopped it/,
  46841: /^MongoDB killed a command of the daemon \(Interrupted or ClientMarkedKilled\)/,
  56846:
    /^MongoDB's router \(mongos\) cannot reach the config server replica set \(ConfigServerUnreachable\): .*check that the config servers are up/,
};

/**
 * The daemon's one warning for the store briefly out of reach, naming the server's error as the
 * operator reads it (no stack); for those the operator may have to look into (OWN_WARNINGS: a
 * KeyNotFound that lasts until the daemon restarts, a command killed, a router without its config
 * servers), one that says so.
 */
const outageWarning = ({ code, codeName, errmsg }: (typeof PASSING_SERVER_ERRORS)[number]) =>
  expect.objectContaining({
    level: 40,
    msg:
      code in OWN_WARNINGS
        ? expect.stringMatching(OWN_WARNINGS[code] as RegExp)
        : "the store cannot be reached; calls fail with unavailable until it can",
    storeError: { name: "MongoServerError", code, codeName, message: errmsg },
  });

describe("MongoDB briefly unable to serve", () => {
  const daemon = useStandInDaemon();

  it.each(PASSING_SERVER_ERRORS)(
    "answers a write it refused with $code ($codeName) UNAVAILABLE, Retry-After 1, logged as the store out of reach",
    async (serverError) => {
      const running = await daemon.start(
        emptyDatabase(undefined, { insert: () => ({ ok: 0, ...serverError }) }),
      );
      const admin = createClient(AdminService, createGrpcTransport({ baseUrl: running.daemonUrl }));
      expect(
        await failureOf(admin.createTeam({ name: "Acme", plan: "free" }, daemon.asOperator)),
      ).toEqual({
        code: Code.Unavailable,
        errorCode: "unavailable",
        message: "The store is temporarily unavailable; retry later",
        retryAfter: "1",
      });
      // A warning, not the error line of a crash in the service.
      expect(running.logs).toEqual([outageWarning(serverError)]);
      expect(running.logs[0]).not.toHaveProperty("err");
    },
  );

  it("answers a write refused without a code but labelled RetryableWriteError UNAVAILABLE, Retry-After 1, by its label, after the driver's one retry", async () => {
    // As a server names a member that is not primary in words alone ("not master"): the label,
    // which the driver reads too (hasErrorLabel), says what the words do.
    const running = await daemon.start(
      emptyDatabase(undefined, {
        insert: () => ({ ok: 0, errmsg: "not master", errorLabels: ["RetryableWriteError"] }),
      }),
    );
    const admin = createClient(AdminService, createGrpcTransport({ baseUrl: running.daemonUrl }));
    expect(
      await failureOf(admin.createTeam({ name: "Acme", plan: "free" }, daemon.asOperator)),
    ).toMatchObject({ code: Code.Unavailable, errorCode: "unavailable", retryAfter: "1" });
    expect(running.server.commands.filter((command) => "insert" in command)).toHaveLength(2);
    // The line names the labels the driver keeps in a Set, as a list.
    expect(running.logs).toEqual([
      expect.objectContaining({
        level: 40,
        msg: "the store cannot be reached; calls fail with unavailable until it can",
        storeError: {
          name: "MongoServerError",
          labels: ["RetryableWriteError"],
          message: "not master",
        },
      }),
    ]);
  });

  it("answers a REST request whose read met a stale shard configuration 503 unavailable with Retry-After: 1", async () => {
    const running = await daemon.start(
      emptyDatabase(undefined, {
        find: (command) =>
          command.find === "api_keys"
            ? { ok: 0, code: 13388, codeName: "StaleConfig", errmsg: "shard version not ok" }
            : cursorReply(`${command.$db}.${command.find}`, []),
      }),
    );
    const gateway = await gatewayOver(running, daemon.asOperator.headers.authorization);
    try {
      const response = await fetch(`${gateway.url}/api/v1/banners`, {
        headers: { authorization: `Bearer ${generateApiKey("live")}` },
      });
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("1");
      expect(await response.json()).toEqual({
        version: "v1",
        data: { code: "unavailable", error: "The store is temporarily unavailable; retry later" },
      });
      expect(running.logs).toEqual([
        outageWarning({ code: 13388, codeName: "StaleConfig", errmsg: "shard version not ok" }),
      ]);
    } finally {
      await gateway.close();
    }
  });
});

/** A stand-alone gateway (its own transport over the daemon's port) on a free port. */
function gatewayOver(running: StandInDaemon, operatorAuthorization: string) {
  return startGateway({
    config: loadConfig({ CONSENT_HTTP_PORT: "0" }),
    transport: createDaemonTransport({ baseUrl: running.daemonUrl }),
    operatorToken: operatorAuthorization.replace(/^Bearer /, ""),
    logger: pino({ level: "silent" }),
  });
}
