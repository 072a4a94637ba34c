import { randomUUID } from "node:crypto";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Document } from "mongodb";
import { describe, expect, it } from "vitest";
import { cursorReply, emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import {
  failureOf,
  type StandInDaemonPerTest,
  useStandInDaemon,
} from "#test/support/stand-in-daemon.js";

/**
 * Key rotation by a daemon over the MongoDB adapter and a wire-protocol stand-in for the server
 * (mongo-wire-stand-in.ts), where the write that marks the old key replaced meets a majority that
 * does not answer in time: applied on the primary, its outcome unknown to the daemon, which a
 * real one-member replica set cannot be made to do.
 */

/** MongoDB's write concern failure of a write applied on the primary that no majority confirmed. */
const MAJORITY_TIMED_OUT = {
  code: 64,
  codeName: "WriteConcernFailed",
  errmsg: "waiting for replication timed out",
  errInfo: { wtimeout: true },
};

/**
 * The api_keys collection as a primary holds it (`latest`) and as a majority has confirmed it
 * (`confirmed`), which reads with read concern majority see. Finds match on equality, and
 * findAndModify applies the adapter's two updates: a rotation's mark (a pipeline, retire) and a
 * revocation ($set). While `unconfirmedRetires` is above 0, a retire is applied on the primary
 * only and answered with MAJORITY_TIMED_OUT.
 */
function apiKeys(documents: Document[]) {
  const latest = new Map(documents.map((document) => [document._id, { ...document }]));
  let confirmed = structuredClone(latest);
  const matches = (document: Document, filter: Document) =>
    Object.entries(filter).every(([field, condition]) =>
      condition?.$exists === false
        ? document[field] === undefined
        : condition === null
          ? document[field] == null
          : document[field] === condition,
    );
  return {
    latest,
    unconfirmedRetires: 0,
    /** A revocation refused by the server (a failure of its own, whatever it is). */
    refusesRevocations: false,
    /** The majority catches up with the primary. */
    confirm() {
      confirmed = structuredClone(latest);
    },
    find(command: Document): Document {
      const view = command.readConcern?.level === "majority" ? confirmed : latest;
      const found = [...view.values()].filter((document) => matches(document, command.filter));
      return cursorReply(`${command.$db}.api_keys`, found);
    },
    insert(command: Document): Document {
      for (const document of command.documents) latest.set(document._id, { ...document });
      this.confirm();
      return { n: command.documents.length, ok: 1 };
    },
    /** Runs as a retire arrives, before it is applied: another daemon's write that beat it. */
    beforeRetire: () => {},
    findAndModify(command: Document): Document {
      const retire = Array.isArray(command.update);
      if (retire) this.beforeRetire();
      else if (this.refusesRevocations) {
        return { ok: 0, code: 2, codeName: "BadValue", errmsg: "revocation refused" };
      }
      const document = [...latest.values()].find((stored) => matches(stored, command.query));
      if (document && retire) {
        const set = command.update[0].$set;
        document.replacedBy = set.replacedBy.$literal;
        document.replacedAt = set.replacedAt;
        // The earlier of the stored expiry and the grace period's end, as the pipeline says.
        const graceEnd: Date = set.expiresAt.$cond[2];
        document.expiresAt =
          document.expiresAt && document.expiresAt < graceEnd ? document.expiresAt : graceEnd;
      } else if (document) Object.assign(document, command.update.$set);
      const reply = {
        lastErrorObject: { n: document ? 1 : 0, updatedExisting: Boolean(document) },
        value: document ?? null,
        ok: 1,
      };
      // A write that matched nothing waits for its majority too.
      if (retire && this.unconfirmedRetires > 0) {
        this.unconfirmedRetires--;
        return { ...reply, writeConcernError: MAJORITY_TIMED_OUT };
      }
      this.confirm();
      return reply;
    },
  };
}

/** `daemon` over a database holding one team and one current key of it, on a free port. */
async function startDaemon(daemon: StandInDaemonPerTest) {
  const teamId = randomUUID();
  const now = new Date();
  const key = {
    _id: randomUUID(),
    teamId,
    environment: "live",
    name: "ci",
    scopes: ["banners:read"],
    keyHash: "0".repeat(64),
    hint: "ck_live_…abcd",
    createdAt: now,
    expiresAt: null,
    revokedAt: null,
  };
  const keys = apiKeys([key]);
  const ofKeys =
    (answer: (command: Document) => Document, otherwise: (command: Document) => Document) =>
    (command: Document) =>
      Object.values(command)[0] === "api_keys" ? answer(command) : otherwise(command);
  const database = emptyDatabase(undefined, {
    find: ofKeys(
      (command) => keys.find(command),
      (command) => cursorReply(`${command.$db}.${command.find}`, []),
    ),
    insert: ofKeys(
      (command) => keys.insert(command),
      (command) => ({ n: command.documents.length, ok: 1 }),
    ),
    findAndModify: ofKeys(
      (command) => keys.findAndModify(command),
      () => ({ lastErrorObject: { n: 0 }, value: null, ok: 1 }),
    ),
  });
  const running = await daemon.start(database);
  const client = createClient(AdminService, createGrpcTransport({ baseUrl: running.daemonUrl }));
  return { client, keys, oldId: key._id };
}

describe("key rotation over MongoDB when the old key's mark times out on its majority", () => {
  const daemon = useStandInDaemon();
  const { asOperator } = daemon;

  it("answers unavailable and keeps the key it minted, so the rotation converges once the mark is confirmed", async () => {
    const { client, keys, oldId } = await startDaemon(daemon);
    keys.unconfirmedRetires = 1;
    const rotation = { id: oldId, gracePeriodSeconds: 0 };
    expect(await failureOf(client.rotateApiKey(rotation, asOperator))).toEqual({
      code: Code.Unavailable,
      errorCode: "unavailable",
      message: "The store is temporarily unavailable; retry later",
      retryAfter: "1",
    });
    // The mark was applied: the old key names the key minted for it, which is not revoked.
    const newId = keys.latest.get(oldId)?.replacedBy;
    expect(newId).toEqual(expect.any(String));
    // With no grace period the mark records the rotation's moment as the expiry, which every
    // daemon reads as expired whatever its clock (keyExpired).
    const marked = keys.latest.get(oldId);
    expect(marked?.replacedAt).toEqual(expect.any(Date));
    expect(marked?.expiresAt).toEqual(marked?.replacedAt);
    expect(keys.latest.get(newId)?.revokedAt).toBeNull();

    keys.confirm();
    expect(await failureOf(client.rotateApiKey(rotation, asOperator))).toMatchObject({
      code: Code.FailedPrecondition,
      errorCode: "failed_precondition",
      message: expect.stringContaining(`key ${newId} replaced it`),
    });
    // As the refusal says: rotating the replacement gives a key to use.
    const rotated = await client.rotateApiKey({ id: newId, gracePeriodSeconds: 0 }, asOperator);
    expect(rotated.secret).toMatch(/^ck_live_/);
    expect(rotated.previous?.id).toBe(newId);
    expect(rotated.apiKey?.revokedAt).toBeUndefined();
  });

  it("revokes the key it minted when the old key, read again, was replaced by another rotation", async () => {
    const { client, keys, oldId } = await startDaemon(daemon);
    keys.unconfirmedRetires = 1;
    // Another daemon's rotation got there first, and a majority has it.
    const winner = randomUUID();
    keys.beforeRetire = () => {
      (keys.latest.get(oldId) as Document).replacedBy = winner;
      keys.confirm();
    };
    const rotation = { id: oldId, gracePeriodSeconds: 60 };
    expect(await failureOf(client.rotateApiKey(rotation, asOperator))).toMatchObject({
      code: Code.Unavailable,
      errorCode: "unavailable",
    });
    const minted = [...keys.latest.values()].filter(
      (document) => document._id !== oldId && document._id !== winner,
    );
    expect(minted).toHaveLength(1);
    expect(minted[0]?.revokedAt).toEqual(expect.any(Date));
  });

  it("answers the mark's own failure when revoking the key it minted fails too", async () => {
    const { client, keys, oldId } = await startDaemon(daemon);
    keys.unconfirmedRetires = 1;
    keys.refusesRevocations = true;
    const winner = randomUUID();
    keys.beforeRetire = () => {
      (keys.latest.get(oldId) as Document).replacedBy = winner;
      keys.confirm();
    };
    expect(
      await failureOf(client.rotateApiKey({ id: oldId, gracePeriodSeconds: 60 }, asOperator)),
    ).toMatchObject({ code: Code.Unavailable, errorCode: "unavailable", retryAfter: "1" });
  });
});
