import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { type Document, Double, UUID } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { aBanner } from "#daemon/banners/banner-store.contract.js";
import { StartupError } from "#daemon/config.js";
import { openMongoStore } from "#daemon/store/mongo-store.js";
import { mongoTimeouts } from "#daemon/store/mongo-timeouts.js";
import {
  emptyDatabase,
  startWireStandIn,
  type WireStandIn,
  writeConcernTimedOut,
} from "#daemon/store/mongo-wire-stand-in.js";
import { DuplicateKeyError, type Store } from "#daemon/store/store.js";
import type { SubjectRecord } from "#daemon/subjects/subject-store.js";

/**
 * The MongoDB adapter over a wire-protocol stand-in for the server (mongo-wire-stand-in.ts), for
 * what a real server cannot be made to do: stop answering, or hold an index an older version
 * left under a name this one uses. The contract suite runs against a real server (store.test.ts).
 */

function aTeam() {
  const now = new Date();
  return { id: randomUUID(), name: "Acme", plan: "free", createdAt: now, updatedAt: now };
}

let server: WireStandIn | undefined;
const stores: Store[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((store) => store.close()));
  await server?.close();
  server = undefined;
});

async function open(
  database: ReturnType<typeof emptyDatabase>,
  timeoutMs: number,
  options: { standalone?: boolean } = {},
) {
  server ??= await startWireStandIn((command, name) => database.answer(command, name), options);
  const store = await openMongoStore({ uri: server.uri("shop"), timeoutMs });
  stores.push(store);
  return store;
}

/** What `call` rejected with; undefined when it resolved. */
function rejectionOf(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
}

describe("MongoDB store: a primary that stops answering", () => {
  // The setting's least value keeps the test short: each reply is waited for 2 s.
  const timeouts = mongoTimeouts(1_000);

  it("fails a read and a write as unavailable (503) once both attempts went unanswered, within the bound", async () => {
    const database = emptyDatabase();
    const store = await open(database, 1_000);
    database.stopAnswering();
    const started = performance.now();
    const outcomes = await Promise.allSettled([store.teams.get("t1"), store.teams.insert(aTeam())]);
    const elapsed = performance.now() - started;
    for (const outcome of outcomes) {
      expect(outcome.status).toBe("rejected");
      const reason = outcome.status === "rejected" ? outcome.reason : undefined;
      expect(store.unavailability(reason)).toBeDefined();
    }
    // The driver sent each once more (retryReads, retryWrites), and waited for each reply.
    const sent = server?.commands ?? [];
    expect(sent.filter((command) => command.find === "teams")).toHaveLength(2);
    expect(sent.filter((command) => command.insert === "teams")).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(2 * timeouts.replyMs - 50);
    expect(elapsed).toBeLessThan(timeouts.commandMs);
  }, 20_000);

  it("fails a read and a write in flight when the store closes as unavailable (503), as one sent after it", async () => {
    const database = emptyDatabase();
    const store = await open(database, 5_000);
    database.stopAnswering();
    const sentBefore = server?.commands.length ?? 0;
    const inFlight = [
      rejectionOf(store.teams.get("t1")),
      rejectionOf(store.subjects.find(["ik_1:a"], new Date())),
      rejectionOf(store.teams.insert(aTeam())),
    ];
    // Each command is on the wire, unanswered, when the store closes (a drain's cut).
    while ((server?.commands.length ?? 0) < sentBefore + 3) {
      await new Promise((go) => setTimeout(go, 10));
    }
    await store.close();
    const after = rejectionOf(store.teams.get("t2"));
    for (const reason of [...(await Promise.all(inFlight)), await after]) {
      expect(reason).toBeInstanceOf(Error);
      expect(store.unavailability(reason), (reason as Error).name).toBeDefined();
    }
  });

  it("asks the server to give up on a log read and on a write's majority at the setting", async () => {
    const store = await open(emptyDatabase(), 4_000);
    await store.consentLog.list({ teamId: "t1", limit: 10 });
    await store.consentLog.stats({ teamId: "t1", requiredCategories: {} });
    await store.teams.insert(aTeam());
    const sent = server?.commands ?? [];
    expect(sent.find((command) => command.find === "consent_log")?.maxTimeMS).toBe(4_000);
    expect(sent.find((command) => command.aggregate === "consent_log")?.maxTimeMS).toBe(4_000);
    expect(sent.find((command) => command.insert === "teams")?.writeConcern).toEqual({
      w: "majority",
      j: true,
      wtimeout: 4_000,
    });
  });
});

describe("MongoDB store: log tails over late acknowledgements", () => {
  it("has a tail re-read as far back as an append can be acknowledged, the driver's retry included", async () => {
    const store = await open(emptyDatabase(), 10_000);
    // An append answered 200 after the longest wait is still met by every running tail's sweep.
    expect(store.consentLog.lateRowsMs).toBeGreaterThanOrEqual(mongoTimeouts(10_000).commandMs);
    expect(store.consentLog.lateRowsMs).toBe(65_000);
  });
});

describe("MongoDB store: indexes at start-up", () => {
  it("builds its indexes on an empty database, and finds them at the next start without building", async () => {
    const database = emptyDatabase();
    await open(database, 1_000);
    const built = server?.commands.filter((command) => "createIndexes" in command) ?? [];
    expect(built.map((command) => command.createIndexes).sort()).toContain("webhook_deliveries");
    await open(database, 1_000);
    const builtAgain = server?.commands.filter((command) => "createIndexes" in command) ?? [];
    expect(builtAgain).toHaveLength(built.length);
  });

  it("has each build commit once a majority of the replica set's data-bearing voting members has it", async () => {
    await open(emptyDatabase(), 1_000);
    const built = server?.commands.filter((command) => "createIndexes" in command) ?? [];
    expect(built.length).toBeGreaterThan(0);
    for (const command of built) expect(command.commitQuorum).toBe("majority");
  });

  it("asks a standalone server, which refuses any commit quorum, for builds without one", async () => {
    await open(emptyDatabase(), 1_000, { standalone: true });
    const built = server?.commands.filter((command) => "createIndexes" in command) ?? [];
    expect(built.length).toBeGreaterThan(0);
    for (const command of built) expect(command).not.toHaveProperty("commitQuorum");
  });

  it("finds its indexes as servers list them, numbers as doubles and 4.2's ns and background, and builds none", async () => {
    const database = emptyDatabase();
    await open(database, 1_000);
    const built = server?.commands.filter((command) => "createIndexes" in command).length;
    // As mongosh or a server from 4.2 on lists what another client created with doubles.
    const asDoubles = (value: unknown): unknown =>
      typeof value === "number"
        ? new Double(value)
        : Array.isArray(value)
          ? value.map(asDoubles)
          : value && typeof value === "object" && !(value instanceof Date)
            ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asDoubles(v)]))
            : value;
    for (const [collection, indexes] of database.indexes) {
      database.indexes.set(
        collection,
        indexes.map((index) => ({
          ...(asDoubles(index) as Document),
          v: 2,
          ns: `shop.${collection}`,
          background: true,
        })),
      );
    }
    await open(database, 1_000);
    expect(server?.commands.filter((command) => "createIndexes" in command)).toHaveLength(
      built ?? -1,
    );
  });

  /** The due index as a daemon starting beside this one asked for it: listed, its build running. */
  const dueBeingBuilt = (partialFilterExpression: Document) => ({
    spec: {
      v: 2,
      key: { dueAt: 1, webhookId: 1, teamId: 1 },
      name: "webhook_deliveries_due_by_endpoint",
      partialFilterExpression,
    },
    buildUUID: new UUID(),
  });

  it("waits for an index another daemon's start is still building, asking for it too, before it comes up", async () => {
    let buildEnds: () => void = () => {};
    const building = new Promise<void>((resolve) => {
      buildEnds = resolve;
    });
    const indexes = new Map([["webhook_deliveries", [dueBeingBuilt({ status: "pending" })]]]);
    const database = emptyDatabase(indexes, {
      // MongoDB answers a call for an index being built when that build ends.
      createIndexes: async (command) => {
        if (command.createIndexes === "webhook_deliveries") await building;
        return { ok: 1 };
      },
    });
    let opened = false;
    const opening = open(database, 1_000).then((store) => {
      opened = true;
      return store;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(opened).toBe(false);
    buildEnds();
    await opening;
    const asked = (server?.commands ?? []).filter(
      (command) => command.createIndexes === "webhook_deliveries",
    );
    expect(
      asked.flatMap((command) => command.indexes.map((index: Document) => index.name)),
    ).toContain("webhook_deliveries_due_by_endpoint");
  });

  it("refuses to start on an index of its name being built otherwise, as on one built so", async () => {
    const indexes = new Map([["webhook_deliveries", [dueBeingBuilt({ status: "failed" })]]]);
    await expect(open(emptyDatabase(indexes), 1_000)).rejects.toThrow(
      /webhook_deliveries\.webhook_deliveries_due_by_endpoint is \{"dueAt":1,"webhookId":1,"teamId":1\}, partial \{"status":"failed"\} but/,
    );
    expect(server?.commands.some((command) => "createIndexes" in command)).toBe(false);
  });

  it("refuses to start on an index of its name defined otherwise, naming it and the fix, and builds nothing", async () => {
    // An older version's key index, without its uniqueness.
    const left = new Map([
      ["api_keys", [{ v: 2, key: { keyHash: 1 }, name: "api_keys_key_hash" }]],
    ]);
    const opening = open(emptyDatabase(left), 1_000);
    await expect(opening).rejects.toBeInstanceOf(StartupError);
    await expect(opening).rejects.toThrow(
      'api_keys.api_keys_key_hash is {"keyHash":1} but this version needs {"keyHash":1}, unique',
    );
    await expect(opening).rejects.toThrow(
      'db.getCollection("<collection>").dropIndex("<index>")) and start again',
    );
    expect(server?.commands.some((command) => "createIndexes" in command)).toBe(false);
  });

  it("refuses to start on a collection created with a default collation, naming it and the fix, before reading its indexes", async () => {
    // As mongorestore of a dump with options leaves it: the collection's collation, and its
    // index's, which a build there takes.
    const collation = { locale: "en", strength: 2 };
    const restored = new Map([
      [
        "consent_log",
        [{ v: 2, key: { teamId: 1, _id: -1 }, name: "consent_log_by_team", collation }],
      ],
    ]);
    const database = emptyDatabase(restored);
    database.collections.set("consent_log", { collation });
    database.collections.set("teams", {});
    const opening = open(database, 1_000);
    await expect(opening).rejects.toBeInstanceOf(StartupError);
    await expect(opening).rejects.toThrow('consent_log (collation {"locale":"en","strength":2})');
    await expect(opening).rejects.toThrow("mongorestore --noOptionsRestore");
    await expect(opening).rejects.not.toThrow("teams");
    await expect(opening).rejects.not.toThrow("dropIndex");
    const listing = server?.commands.find((command) => "listCollections" in command);
    expect(listing).toMatchObject({
      nameOnly: false,
      filter: { name: { $in: expect.any(Array) } },
    });
    expect(listing?.filter.name.$in).toContain("consent_log");
    expect(server?.commands.some((command) => "listIndexes" in command)).toBe(false);
    expect(server?.commands.some((command) => "createIndexes" in command)).toBe(false);
  });

  it("starts on collections created beforehand without a collation, or with the simple one", async () => {
    const database = emptyDatabase();
    database.collections.set("consent_log", { collation: { locale: "simple" } });
    database.collections.set("teams", {});
    const store = await open(database, 1_000);
    expect(await store.teams.get("t1")).toBeNull();
  });

  it("refuses to start on an index made by hand with the keys of one of its own, naming both and the drop to run", async () => {
    // mongosh's createIndex({ keyHash: 1 }, { unique: true }) names it keyHash_1.
    const byHand = { v: 2, key: { keyHash: 1 }, name: "keyHash_1", unique: true };
    const database = emptyDatabase(new Map([["api_keys", [byHand]]]), {
      createIndexes: (command) =>
        command.createIndexes === "api_keys"
          ? {
              ok: 0,
              code: 85,
              codeName: "IndexOptionsConflict",
              errmsg: "Index already exists with a different name: keyHash_1",
            }
          : { ok: 1 },
    });
    const opening = open(database, 1_000);
    await expect(opening).rejects.toBeInstanceOf(StartupError);
    await expect(opening).rejects.toThrow(
      'api_keys.keyHash_1 ({"keyHash":1}, unique) has the keys of api_keys.api_keys_key_hash, which this version needs as {"keyHash":1}, unique',
    );
    await expect(opening).rejects.toThrow(
      'Drop each one (in mongosh: db.getCollection("api_keys").dropIndex("keyHash_1")) and start again',
    );
    await expect(opening).rejects.not.toThrow(/privilege/);
  });

  it("comes up when the retired index it lists was dropped by a daemon starting beside it", async () => {
    // An earlier release's due index, listed here, then dropped by another daemon first.
    const left = new Map([
      [
        "webhook_deliveries",
        [
          {
            v: 2,
            key: { dueAt: 1 },
            name: "webhook_deliveries_due",
            partialFilterExpression: { status: "pending" },
          },
        ],
      ],
    ]);
    const database = emptyDatabase(left, {
      dropIndexes: (command) => ({
        ok: 0,
        code: 27,
        codeName: "IndexNotFound",
        errmsg: `index not found with name [${command.index}]`,
      }),
    });
    const store = await open(database, 1_000);
    const drops = server?.commands.filter((command) => "dropIndexes" in command) ?? [];
    expect(drops.map((command) => [command.dropIndexes, command.index])).toEqual([
      ["webhook_deliveries", "webhook_deliveries_due"],
    ]);
    expect(await store.teams.get("t1")).toBeNull();
  });

  it("still refuses to start when dropping a retired index fails otherwise, naming the server's reason", async () => {
    const left = new Map([
      ["webhook_deliveries", [{ v: 2, key: { dueAt: 1 }, name: "webhook_deliveries_due" }]],
    ]);
    const database = emptyDatabase(left, {
      dropIndexes: () => ({
        ok: 0,
        code: 13,
        codeName: "Unauthorized",
        errmsg: "not authorized to drop",
      }),
    });
    await expect(open(database, 1_000)).rejects.toThrow(/not authorized to drop/);
  });
});

describe("MongoDB store: the server's release", () => {
  it("refuses to start on a server older than 5.0, naming its version, and builds nothing", async () => {
    // MongoDB 4.4, which the driver still connects to.
    const database = emptyDatabase(undefined, {
      buildInfo: () => ({ version: "4.4.29", versionArray: [4, 4, 29, 0], ok: 1 }),
    });
    const opening = open(database, 1_000);
    await expect(opening).rejects.toBeInstanceOf(StartupError);
    await expect(opening).rejects.toThrow(
      /^MongoDB at 127\.0\.0\.1:\d+ is version 4\.4\.29; this service needs MongoDB 5\.0 or later/,
    );
    expect(server?.commands.some((command) => "createIndexes" in command)).toBe(false);
  });

  it("starts on MongoDB 5.0", async () => {
    const database = emptyDatabase(undefined, {
      buildInfo: () => ({ version: "5.0.0", versionArray: [5, 0, 0, 0], ok: 1 }),
    });
    const store = await open(database, 1_000);
    expect(await store.teams.get("t1")).toBeNull();
  });
});

describe("MongoDB store: webhook claims", () => {
  it("hints the due index by its name, so an index made by hand with the same keys stops no delivery", async () => {
    // Made by hand beside the service's due index: the same keys, another partial filter.
    const byHand = {
      v: 2,
      key: { dueAt: 1, webhookId: 1, teamId: 1 },
      name: "failed_due_by_hand",
      partialFilterExpression: { status: "failed" },
    };
    // As MongoDB resolves a hint: a name is one index; keys that several indexes have are refused.
    const database = emptyDatabase(new Map([["webhook_deliveries", [byHand]]]), {
      findAndModify: (command) => {
        const hinted = (database.indexes.get(command.findAndModify) ?? []).filter((index) =>
          typeof command.hint === "string"
            ? index.name === command.hint
            : isDeepStrictEqual(index.key, command.hint),
        );
        if (hinted.length > 1) {
          return {
            ok: 0,
            code: 27,
            codeName: "IndexNotFound",
            errmsg: "Hint matched multiple indexes, must hint by index name",
          };
        }
        return { lastErrorObject: { n: 0, updatedExisting: false }, value: null, ok: 1 };
      },
    });
    const store = await open(database, 1_000);
    const lease = { owner: "daemon-1", until: new Date(Date.now() + 60_000) };
    await expect(store.webhooks.claimDeliveries(lease, new Date(), 5)).resolves.toEqual([]);
    await expect(store.webhooks.claimDeliveries(lease, new Date(), 5)).resolves.toEqual([]);
    const claims = server?.commands.filter((command) => "findAndModify" in command) ?? [];
    // The first claim looks for leases, then retries, set ahead of the clock (WebhookStore,
    // "Clock steps"), each on the index that answers it, then for due deliveries; the next
    // claim within a lease length looks only for due deliveries.
    expect(claims.map((command) => [command.hint, Object.keys(command.query).sort()])).toEqual([
      ["webhook_deliveries_leases", ["leaseUntil", "status"]],
      ["webhook_deliveries_due_by_endpoint", ["dueAt", "status"]],
      ["webhook_deliveries_due_by_endpoint", ["$or", "dueAt", "status"]],
      ["webhook_deliveries_due_by_endpoint", ["$or", "dueAt", "status"]],
    ]);
  });
});

/** Version 1 of subject "k1:subject", written at `now`, live for a day. */
function aSubjectRecord(now: Date): SubjectRecord {
  return {
    subjectHash: "k1:subject",
    teamId: "t1",
    bannerId: "b1",
    consentState: { analytics: true },
    protocolVersion: 1,
    version: 1,
    clientUpdatedAt: now.toISOString(),
    updatedAt: now,
    expiresAt: new Date(now.getTime() + 86_400_000),
  };
}

describe("MongoDB store: a subject's first write", () => {
  const now = new Date();
  const subject = aSubjectRecord(now);
  /** The server's refusal of an insert on a unique index, as it names the index and its key. */
  const duplicateOn = (index: string, key: Document) => ({
    ok: 1,
    n: 0,
    writeErrors: [
      {
        index: 0,
        code: 11000,
        errmsg: `E11000 duplicate key error collection: shop.subjects index: ${index} dup key: ${JSON.stringify(key)}`,
        keyPattern: Object.fromEntries(Object.keys(key).map((field) => [field, 1])),
        keyValue: key,
      },
    ],
  });
  /** The commands on the subjects collection sent from the `from`th command on. */
  const sentToSubjects = (from: number) =>
    (server?.commands ?? [])
      .slice(from)
      .filter((command) => Object.values(command)[0] === "subjects")
      .map((command) => Object.keys(command)[0]);

  it("takes a duplicate _id for a subject already stored, and answers conflict with it", async () => {
    const database = emptyDatabase(undefined, {
      insert: (command) =>
        command.insert === "subjects"
          ? duplicateOn("_id_", { _id: subject.subjectHash })
          : { n: command.documents.length, ok: 1 },
      findAndModify: () => ({ lastErrorObject: { n: 0 }, value: null, ok: 1 }),
    });
    const { subjectHash, ...stored } = { ...subject, version: 3 };
    database.documents.set("subjects", [{ _id: subjectHash, ...stored }]);
    const store = await open(database, 1_000);
    const result = await store.subjects.write(subject, 0, now);
    expect(result).toMatchObject({ outcome: "conflict", current: { version: 3 } });
  });

  it("fails as unavailable (503), not as a conflict, on a duplicate _id whose majority did not answer in time", async () => {
    // The insert did not happen; the subject it met is on the primary, but the server could not
    // confirm within wtimeout that a majority has it, so a failover may still roll it back.
    const database = emptyDatabase(undefined, {
      insert: (command) =>
        command.insert === "subjects"
          ? writeConcernTimedOut(duplicateOn("_id_", { _id: subject.subjectHash }))
          : { n: command.documents.length, ok: 1 },
    });
    const { subjectHash, ...stored } = subject;
    database.documents.set("subjects", [{ _id: subjectHash, ...stored }]);
    const store = await open(database, 1_000);
    const opened = server?.commands.length;
    const failure = await rejectionOf(store.subjects.write(subject, 0, now));
    expect(store.unavailability(failure)).toBeDefined();
    // Nothing read to answer with: the client's retry meets the state that stood.
    expect(sentToSubjects(opened ?? 0)).toEqual(["insert"]);
  });

  it("fails at once on a duplicate key of another unique index, naming its field, instead of taking it for a stored subject", async () => {
    // An index made by hand: no other unique index is the service's own.
    const database = emptyDatabase(undefined, {
      insert: (command) =>
        command.insert === "subjects"
          ? duplicateOn("subjects_by_banner", { teamId: "t1", bannerId: "b1" })
          : { n: command.documents.length, ok: 1 },
    });
    const store = await open(database, 1_000);
    const opened = server?.commands.length;
    const writing = store.subjects.write(subject, 0, now);
    await expect(writing).rejects.toBeInstanceOf(DuplicateKeyError);
    await expect(writing).rejects.toThrow("duplicate subject teamId");
    expect(sentToSubjects(opened ?? 0)).toEqual(["insert"]);
  });
});

describe("MongoDB store: a subject's write under a newer identity key", () => {
  const now = new Date();
  const former = aSubjectRecord(now);
  const next: SubjectRecord = { ...former, subjectHash: "k2:subject", version: 2 };
  const stored = (record: SubjectRecord) => {
    const { subjectHash, ...rest } = record;
    return { _id: subjectHash, ...rest };
  };
  /** The commands sent from the `from`th on, but the driver's own (hello, endSessions). */
  const sentFrom = (from: number) =>
    (server?.commands ?? [])
      .slice(from)
      .filter(
        (command) => !["hello", "ismaster", "endSessions"].includes(Object.keys(command)[0] ?? ""),
      );
  const aborted = { ok: 0, code: 20, codeName: "IllegalOperation" };

  it("moves it in one transaction: snapshot read of both hashes, upsert, delete, majority commit", async () => {
    const database = emptyDatabase();
    database.documents.set("subjects", [stored(former)]);
    const store = await open(database, 1_000);
    const opened = server?.commands.length ?? 0;
    const result = await store.subjects.write(next, 1, now, former.subjectHash);
    expect(result).toEqual({ outcome: "written", record: next });
    const sent = sentFrom(opened);
    expect(sent.map((command) => Object.keys(command)[0])).toEqual([
      "find",
      "update",
      "delete",
      "commitTransaction",
    ]);
    const [find, update, remove, commit] = sent as Document[];
    expect(find).toMatchObject({
      filter: { _id: { $in: ["k2:subject", "k1:subject"] } },
      startTransaction: true,
      autocommit: false,
      readConcern: { level: "snapshot" },
    });
    const txnNumber = String(find?.txnNumber);
    for (const command of [update, remove, commit]) {
      expect([String(command?.txnNumber), command?.autocommit]).toEqual([txnNumber, false]);
    }
    expect(update?.updates).toMatchObject([{ q: { _id: "k2:subject" }, upsert: true }]);
    expect(update?.writeConcern).toBeUndefined();
    expect(remove?.deletes).toMatchObject([{ q: { _id: "k1:subject" } }]);
    // The commit waits for its majority as long as every other write does (the setting), not the
    // driver's 10 s default for a transaction.
    expect(commit?.writeConcern).toEqual({ w: "majority", j: true, wtimeout: 1_000 });
  });

  it("deletes a subject's record under the oldest key's hash first, then the newer ones, one at a time", async () => {
    // Each delete answered a moment later: how many others were waiting for theirs meanwhile.
    let waiting = 0;
    const alongside: number[] = [];
    const database = emptyDatabase(undefined, {
      findAndModify: async () => {
        alongside.push(waiting++);
        await new Promise((resolve) => setTimeout(resolve, 20));
        waiting--;
        return { lastErrorObject: { n: 0 }, value: null, ok: 1 };
      },
    });
    const store = await open(database, 1_000);
    const opened = server?.commands.length ?? 0;
    expect(await store.subjects.delete(["k3:subject", "k2:subject", "k1:subject"], now)).toBe(0);
    expect(alongside).toEqual([0, 0, 0]);
    expect(sentFrom(opened).map((command) => [command.query?._id, command.remove])).toEqual([
      ["k1:subject", true],
      ["k2:subject", true],
      ["k3:subject", true],
    ]);
  });

  it("runs a transaction that met a write conflict again, at most 5 times, waiting longer before each run", async () => {
    let conflicts = 0;
    const database = emptyDatabase(undefined, {
      update: () =>
        ++conflicts <= 7
          ? {
              ok: 0,
              code: 112,
              codeName: "WriteConflict",
              errorLabels: ["TransientTransactionError"],
            }
          : { ok: 1, n: 1, nModified: 1 },
    });
    database.documents.set("subjects", [stored(former)]);
    const store = await open(database, 1_000);
    // The first write gives up after its 5th conflict; the second meets 2 more, then succeeds.
    const started = performance.now();
    await expect(store.subjects.write(next, 1, now, former.subjectHash)).rejects.toMatchObject({
      code: 112,
    });
    expect(conflicts).toBe(5);
    // Before the 2nd to 5th runs, at least half of 5 ms × 1.5^run each: 30 ms in all.
    expect(performance.now() - started).toBeGreaterThanOrEqual(30);
    const opened = server?.commands.length ?? 0;
    expect(await store.subjects.write(next, 1, now, former.subjectHash)).toEqual({
      outcome: "written",
      record: next,
    });
    const starts = sentFrom(opened).filter((command) => command.startTransaction);
    expect(starts).toHaveLength(3);
  });

  it("runs a transaction again whose upsert met a rival's insert of the current hash (duplicate _id)", async () => {
    let duplicates = 0;
    const database = emptyDatabase(undefined, {
      update: () =>
        ++duplicates === 1
          ? {
              ok: 1,
              n: 0,
              writeErrors: [
                {
                  index: 0,
                  code: 11000,
                  errmsg: `E11000 duplicate key error collection: shop.subjects index: _id_ dup key: { _id: "k2:subject" }`,
                  keyPattern: { _id: 1 },
                  keyValue: { _id: "k2:subject" },
                },
              ],
            }
          : { ok: 1, n: 1, nModified: 1 },
    });
    database.documents.set("subjects", [stored(former)]);
    const store = await open(database, 1_000);
    const opened = server?.commands.length ?? 0;
    expect(await store.subjects.write(next, 1, now, former.subjectHash)).toEqual({
      outcome: "written",
      record: next,
    });
    expect(sentFrom(opened).filter((command) => command.startTransaction)).toHaveLength(2);
  });

  it("fails as unavailable (503) when the primary stops answering, after one more run of its transaction, within a command's bound", async () => {
    const database = emptyDatabase();
    database.documents.set("subjects", [stored(former)]);
    const store = await open(database, 1_000);
    database.stopAnswering();
    const opened = server?.commands.length ?? 0;
    const started = performance.now();
    const failure = await store.subjects.write(next, 1, now, former.subjectHash).catch((e) => e);
    const elapsed = performance.now() - started;
    expect(store.unavailability(failure)).toBeDefined();
    // Each run's read went unanswered for the reply's bound; a lost reply is run again once, as
    // the driver sends a single write once more (retryWrites).
    expect(sentFrom(opened).filter((command) => command.startTransaction)).toHaveLength(2);
    expect(elapsed).toBeLessThan(mongoTimeouts(1_000).commandMs);
  }, 20_000);

  it("updates the record where it was found on a server that takes no transaction, and tries none again", async () => {
    const plain = emptyDatabase();
    plain.documents.set("subjects", [stored(former)]);
    const database = emptyDatabase(undefined, {
      find: (command) =>
        command.startTransaction
          ? {
              ...aborted,
              errmsg: "Transaction numbers are only allowed on a replica set member or mongos",
            }
          : (plain.answer(command, "find") as Document),
      findAndModify: (command) => ({
        lastErrorObject: { n: 1, updatedExisting: true },
        value: { _id: command.query._id, ...command.update },
        ok: 1,
      }),
    });
    const store = await open(database, 1_000, { standalone: true });
    const opened = server?.commands.length ?? 0;
    const inPlace = { ...next, subjectHash: former.subjectHash };
    expect(await store.subjects.write(next, 1, now, former.subjectHash)).toEqual({
      outcome: "written",
      record: inPlace,
    });
    expect(await store.subjects.write({ ...next, version: 3 }, 2, now, former.subjectHash)).toEqual(
      { outcome: "written", record: { ...inPlace, version: 3 } },
    );
    const sent = sentFrom(opened).map((command) => Object.keys(command)[0]);
    expect(sent.filter((name) => name === "find")).toHaveLength(1);
    expect(sent.filter((name) => name === "findAndModify")).toHaveLength(2);
    expect(sentFrom(opened).filter((command) => command.findAndModify)).toMatchObject([
      { query: { _id: "k1:subject", version: 1 } },
      { query: { _id: "k1:subject", version: 2 } },
    ]);
  });
});

/** A database whose finds answer every document inserted or replaced in their collection. */
function keepingDatabase() {
  const database = emptyDatabase(undefined, {
    insert: (command) => {
      keep(command.insert, command.documents);
      return { n: command.documents.length, ok: 1 };
    },
    update: (command) => {
      keep(
        command.update,
        command.updates.map(({ q, u }: Document) => ({ _id: q._id, ...u })),
      );
      return { n: command.updates.length, nModified: command.updates.length, ok: 1 };
    },
  });
  const keep = (collection: string, written: Document[]) => {
    const ids = new Set(written.map((document) => document._id));
    const kept = (database.documents.get(collection) ?? []).filter(({ _id }) => !ids.has(_id));
    database.documents.set(collection, [...kept, ...written]);
  };
  return database;
}

/**
 * The store over a stand-in for the primary of replica set rs0 that keeps what it is sent to
 * write, named as the set (not reached directly, where the driver asks for primaryPreferred).
 */
async function openOnReplicaSet() {
  const database = keepingDatabase();
  server = await startWireStandIn((command, name) => database.answer(command, name));
  const host = new URL(server.uri("shop")).host;
  // A URI asking for weaker concerns and secondary reads: the store's own settings stand.
  const store = await openMongoStore({
    uri: `mongodb://${host}/shop?replicaSet=rs0&readPreference=secondaryPreferred&readConcernLevel=local&w=1&journal=false`,
    timeoutMs: 1_000,
  });
  stores.push(store);
  return { store, sent: server.commands };
}

/** How a command was sent: its write concern, read concern and read preference. */
function concernsOf(command: Document | undefined) {
  return {
    writeConcern: command?.writeConcern,
    readConcern: command?.readConcern,
    readPreference: command?.$readPreference?.mode ?? "primary",
  };
}

const MAJORITY_WRITE = { w: "majority", j: true, wtimeout: 1_000 };

/**
 * The reads that must find what a request just wrote (a subject's GET after its PUT, a banner's
 * loader after its publish) go to the primary with read concern majority, the write having waited
 * for a journaled majority: what the write acknowledged is in the snapshot they read, whatever
 * the URI asks for (README, "MongoDB").
 */
describe("MongoDB store: a read after a write", () => {
  it("finds a subject's state just written, read from the primary at read concern majority", async () => {
    const { store, sent } = await openOnReplicaSet();
    const now = new Date();
    const subject = aSubjectRecord(now);
    const from = sent.length;
    await store.subjects.write(subject, 0, now);
    expect(await store.subjects.find([subject.subjectHash], now)).toEqual(subject);
    const write = sent.slice(from).find((command) => command.insert === "subjects");
    const read = sent.slice(from).find((command) => command.find === "subjects");
    expect(concernsOf(write)).toMatchObject({ writeConcern: MAJORITY_WRITE });
    expect(concernsOf(read)).toEqual({
      writeConcern: undefined,
      readConcern: { level: "majority" },
      readPreference: "primary",
    });
  });

  it("finds a banner's publication just written by its public id, read from the primary at read concern majority", async () => {
    const { store, sent } = await openOnReplicaSet();
    const now = new Date();
    const banner = aBanner("t1", now);
    await store.banners.insert(banner);
    const published = {
      ...banner,
      production: { revision: 2, configuration: banner.draft, publishedAt: now },
      version: 2,
    };
    const from = sent.length;
    expect(await store.banners.replace(published, 1)).toBe(true);
    expect(await store.banners.getByPublicId(banner.publicId)).toEqual(published);
    const publish = sent.slice(from).find((command) => command.update === "banners");
    const loaderRead = sent.slice(from).findLast((command) => command.find === "banners");
    expect(concernsOf(publish)).toMatchObject({ writeConcern: MAJORITY_WRITE });
    expect(loaderRead?.filter).toEqual({ publicId: banner.publicId });
    expect(concernsOf(loaderRead)).toEqual({
      writeConcern: undefined,
      readConcern: { level: "majority" },
      readPreference: "primary",
    });
  });
});
