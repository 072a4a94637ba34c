import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm, stat, statfs } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { open } from "lmdb";
import { MongoClient } from "mongodb";
import { afterAll, describe, expect, it } from "vitest";
import { describeBannerStoreContract } from "#daemon/banners/banner-store.contract.js";
import { describeConsentLogStoreContract } from "#daemon/consent-log/consent-log-store.contract.js";
import { aKey, describeKeyStoreContract } from "#daemon/keys/key-store.contract.js";
import { describeCounterStoreContract } from "#daemon/limits/counter-store.contract.js";
import { aSession, describeSessionStoreContract } from "#daemon/sessions/session-store.contract.js";
import { refusesWrites } from "#daemon/store/disk-guard.js";
import { incrementMany, writeSubjectConcurrently } from "#daemon/store/lmdb-second-process.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { DAY, type OpenStore, shifted } from "#daemon/store/store-contract-harness.js";
import { aSubject, describeSubjectStoreContract } from "#daemon/subjects/subject-store.contract.js";
import { describeTeamStoreContract } from "#daemon/teams/team-store.contract.js";
import {
  anEndpoint,
  describeWebhookStoreContract,
} from "#daemon/webhooks/webhook-store.contract.js";

/** Every port's contract, plus the Store's own promises, for one adapter. */
function describeStoreContracts(openStore: OpenStore): void {
  describeTeamStoreContract(openStore);
  describeKeyStoreContract(openStore);
  describeSessionStoreContract(openStore);
  describeBannerStoreContract(openStore);
  describeSubjectStoreContract(openStore);
  describeConsentLogStoreContract(openStore);
  describeCounterStoreContract(openStore);
  describeWebhookStoreContract(openStore);
  it("answers a look-up by an id longer than any stored key as absent", async () => {
    const store = await openStore();
    const [teamId, id] = [randomUUID(), "x".repeat(5_000)];
    try {
      // Ids come from requests (a path, a gRPC field): an id no record can have is unknown.
      expect(await store.teams.get(id)).toBeNull();
      expect(await store.teams.setPlan(id, "free", new Date())).toBeNull();
      expect(await store.keys.get(id)).toBeNull();
      expect(await store.keys.revoke(id, new Date())).toBeNull();
      expect(await store.sessions.get(id, new Date())).toBeNull();
      expect(await store.sessions.revoke(id, new Date())).toBeNull();
      expect(await store.banners.get(teamId, id)).toBeNull();
      expect(await store.banners.getByPublicId(id)).toBeNull();
      expect(await store.webhooks.getEndpoint(teamId, id)).toBeNull();
      expect(await store.webhooks.deleteEndpoint(teamId, id)).toBe(false);
      expect(await store.webhooks.getDelivery(teamId, id)).toBeNull();
    } finally {
      await store.close();
    }
  });
  it("answers ping while open", async () => {
    const store = await openStore();
    await expect(store.ping()).resolves.toBeUndefined();
    await store.close();
  });
}

const tempDirs: string[] = [];
afterAll(async () => {
  await Promise.all(tempDirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "consent-lmdb-"));
  tempDirs.push(dir);
  return dir;
}

/** A store in `dataDir` holding one team, closed again: the team as stored. */
async function storedTeam(dataDir: string, now = new Date()) {
  const team = { id: randomUUID(), name: "Acme", plan: "free", createdAt: now, updatedAt: now };
  const store = await openLmdbStore({ dataDir });
  await store.teams.insert(team);
  await store.close();
  return team;
}

describe("LMDB store", () => {
  describeStoreContracts(async () => openLmdbStore({ dataDir: await tempDir() }));

  it("keeps records, dates included, across close and reopen", async () => {
    const dataDir = await tempDir();
    const now = new Date();
    const record = aSubject(`ik_1:${randomUUID()}`, 1, now);
    const first = await openLmdbStore({ dataDir });
    await first.subjects.write(record, 0, now);
    await first.close();
    const second = await openLmdbStore({ dataDir });
    expect(await second.subjects.find([record.subjectHash], now)).toEqual(record);
    await second.close();
  });

  it("refuses to open records marked with a format this version does not read, and reopens once the mark is gone", async () => {
    const dataDir = await tempDir();
    const team = await storedTeam(dataDir);
    // What a later version would write as it migrates the records to a new layout.
    const mark = async (value: unknown) => {
      const records = open({ path: join(dataDir, "records"), maxDbs: 32 });
      const meta = records.openDB<unknown, string>({ name: "meta" });
      await (value === undefined ? meta.remove("format") : meta.put("format", value));
      await records.close();
    };
    await mark(2);
    await expect(openLmdbStore({ dataDir })).rejects.toThrow(
      "its records are marked as format 2, written by another version of the service; this version reads format 1: run a version that reads it, or restore a backup made by this one",
    );
    // A marker no version writes (changed by hand, or by another program) is named as such.
    await mark("1");
    await expect(openLmdbStore({ dataDir })).rejects.toThrow(
      'its format marker holds "1", which no version of the service writes (this version reads format 1): the marker was changed by something else; restore a backup made by the service',
    );
    await mark(1);
    const reopened = await openLmdbStore({ dataDir });
    expect(await reopened.teams.get(team.id)).toEqual(team);
    await reopened.close();
  });

  it("creates its directories and files owner-only, in a data dir others may read, whatever the umask", async () => {
    const dataDir = join(await tempDir(), "made-beforehand");
    await mkdir(dataDir, { mode: 0o755 });
    const umask = process.umask(0);
    let store: Awaited<ReturnType<typeof openLmdbStore>>;
    try {
      store = await openLmdbStore({ dataDir });
    } finally {
      process.umask(umask);
    }
    await store.close();
    for (const environment of ["records", "counters"]) {
      expect((await stat(join(dataDir, environment))).mode & 0o777).toBe(0o700);
      for (const file of ["data.mdb", "lock.mdb"]) {
        expect((await stat(join(dataDir, environment, file))).mode & 0o777).toBe(0o600);
      }
    }
  });

  it("refuses writes to its records while the disk has less room than asked, and still reads", async () => {
    const dataDir = await tempDir();
    const now = new Date();
    const team = await storedTeam(dataDir, now);

    // More room than this disk has: every write is refused, reads are served.
    const free = await statfs(dataDir);
    const changes: boolean[] = [];
    const full = await openLmdbStore({
      dataDir,
      minFreeBytes: free.bavail * free.bsize + 1024 ** 3,
      onRoomChange: (refusing) => changes.push(refusing),
    });
    expect(changes).toEqual([true]);
    await expect(full.teams.insert({ ...team, id: randomUUID() })).rejects.toThrow(
      /^the data directory's disk has \d+ MB free, below CONSENT_MIN_FREE_MB \(\d+ MB\): the embedded store refuses writes until there is room$/,
    );
    await expect(full.teams.setPlan(team.id, "professional", now)).rejects.toMatchObject({
      name: "StoreFullError",
    });
    expect(await full.teams.get(team.id)).toEqual(team);
    expect(await full.teams.list()).toEqual([team]);
    // The counters are not guarded: refusing them would refuse every request, reads included.
    expect(await full.counters.increment("requests:k", shifted(now, DAY), now)).toBe(1);
    await full.close();
  });

  it("lets revocations and removals through while it refuses other writes, and keeps them", async () => {
    const dataDir = await tempDir();
    const now = new Date();
    const teamId = randomUUID();
    const key = aKey(teamId, now);
    const session = aSession(now, shifted(now, DAY));
    const endedSession = aSession(shifted(now, -2 * DAY), shifted(now, -DAY));
    const endpoint = anEndpoint(teamId, now);
    const kept = aSubject(`ik_1:${randomUUID()}`, 1, now);
    const expired = aSubject(`ik_1:${randomUUID()}`, 1, shifted(now, -2 * DAY));
    const writable = await openLmdbStore({ dataDir });
    await writable.keys.insert(key);
    await writable.sessions.insert(session);
    await writable.sessions.insert(endedSession);
    await writable.webhooks.insertEndpoint(endpoint);
    await writable.subjects.write(kept, 0, now);
    await writable.subjects.write(expired, 0, shifted(now, -2 * DAY));
    await writable.close();

    const free = await statfs(dataDir);
    const full = await openLmdbStore({
      dataDir,
      minFreeBytes: free.bavail * free.bsize + 1024 ** 3,
    });
    // Started in the same turn as a revocation, an ordinary write is still refused.
    const [revoked, refused] = await Promise.allSettled([
      full.keys.revoke(key.id, now),
      full.keys.insert(aKey(teamId, now)),
    ]);
    expect(revoked).toMatchObject({ status: "fulfilled", value: { id: key.id, revokedAt: now } });
    expect(refused).toMatchObject({ status: "rejected", reason: { name: "StoreFullError" } });
    expect(await full.sessions.revoke(session.id, now)).toMatchObject({ revokedAt: now });
    expect(await full.sessions.purgeExpired(now)).toBe(1);
    expect(await full.subjects.delete([kept.subjectHash], now)).toBe(1);
    expect(await full.subjects.purgeExpired(now)).toBe(1);
    expect(await full.webhooks.deleteEndpoint(teamId, endpoint.id)).toBe(true);
    await expect(full.subjects.write(kept, 0, now)).rejects.toMatchObject({
      name: "StoreFullError",
    });
    await full.close();

    const reopened = await openLmdbStore({ dataDir });
    expect(await reopened.keys.get(key.id)).toMatchObject({ revokedAt: now });
    expect(await reopened.keys.listByTeam(teamId)).toHaveLength(1);
    expect(await reopened.sessions.get(session.id, now)).toMatchObject({ revokedAt: now });
    expect(await reopened.sessions.get(endedSession.id, shifted(now, -2 * DAY))).toBeNull();
    expect(await reopened.subjects.find([kept.subjectHash, expired.subjectHash], now)).toBeNull();
    expect(await reopened.webhooks.getEndpoint(teamId, endpoint.id)).toBeNull();
    await reopened.close();
  });

  it("accepts writes again only once a quarter more than the minimum is free", () => {
    const mb = 1024 ** 2;
    expect(refusesWrites(false, 64 * mb, 64 * mb)).toBe(false);
    expect(refusesWrites(false, 64 * mb - 1, 64 * mb)).toBe(true);
    expect(refusesWrites(true, 70 * mb, 64 * mb)).toBe(true);
    expect(refusesWrites(true, 80 * mb, 64 * mb)).toBe(false);
    // The margin stops at 256 MB.
    expect(refusesWrites(true, 10_256 * mb - 1, 10_000 * mb)).toBe(true);
    expect(refusesWrites(true, 10_256 * mb, 10_000 * mb)).toBe(false);
  });

  it("rejects ping once closed", async () => {
    const store = await openLmdbStore({ dataDir: await tempDir() });
    await store.close();
    await expect(store.ping()).rejects.toThrow();
  });
});

/** Starts lmdb-second-process.ts on `dataDir` and resolves once its store is open. */
async function startSecondProcess(dataDir: string, args: string[]) {
  const script = fileURLToPath(new URL("./lmdb-second-process.ts", import.meta.url));
  const child = spawn(process.execPath, ["--import", "tsx", script, dataDir, ...args], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const ready = await lines.next();
  if (ready.value !== "ready") throw new Error(`second process did not start: ${ready.value}`);
  return {
    /** Lets the second process run its task; resolves to the task's result. */
    async run(): Promise<unknown> {
      child.stdin.end("go\n");
      const result = await lines.next();
      expect(await exited).toBe(0);
      return JSON.parse(String(result.value));
    },
  };
}

describe("LMDB store shared by two processes", () => {
  it("counts every increment of both processes", async () => {
    const dataDir = await tempDir();
    const store = await openLmdbStore({ dataDir });
    const expiresAt = shifted(new Date(), DAY);
    const second = await startSecondProcess(dataDir, [
      "increment",
      "shared",
      expiresAt.toISOString(),
      "500",
    ]);
    await Promise.all([second.run(), incrementMany(store.counters, "shared", expiresAt, 500)]);
    expect(await store.counters.get("shared", new Date())).toBe(1000);
    await store.close();
  });

  it("lets exactly one write of a subject race across both processes succeed", async () => {
    const dataDir = await tempDir();
    const store = await openLmdbStore({ dataDir });
    const record = aSubject(`ik_1:${randomUUID()}`, 1, new Date());
    const second = await startSecondProcess(dataDir, [
      "write-subject",
      JSON.stringify(record),
      "20",
    ]);
    const [theirs, ours] = await Promise.all([
      second.run() as Promise<Record<string, number>>,
      writeSubjectConcurrently(store.subjects, record, 20),
    ]);
    expect((theirs.written ?? 0) + (ours.written ?? 0)).toBe(1);
    expect((theirs.conflict ?? 0) + (ours.conflict ?? 0)).toBe(39);
    await store.close();
  });
});

describe.skipIf(!process.env.MONGODB_URI)("MongoDB store", () => {
  const uri = process.env.MONGODB_URI ?? "";
  // One database per opened store, so each test starts empty; dropped after the run.
  const run = `consent_test_${process.pid}_${Date.now()}`;
  const dbNames: string[] = [];
  afterAll(async () => {
    const client = await MongoClient.connect(uri);
    await Promise.all(dbNames.map((name) => client.db(name).dropDatabase()));
    await client.close();
  });

  async function openFresh() {
    // Imported here so that the LMDB run never loads the MongoDB adapter.
    const { openMongoStore } = await import("#daemon/store/mongo-store.js");
    const dbName = `${run}_${dbNames.length}`;
    dbNames.push(dbName);
    return { dbName, store: await openMongoStore({ uri, dbName }) };
  }

  describeStoreContracts(async () => (await openFresh()).store);

  it("starts again on a database it set up, taking the server's listing of its indexes for its own", async () => {
    const { openMongoStore } = await import("#daemon/store/mongo-store.js");
    const { dbName, store } = await openFresh();
    await store.close();
    // The listing holds what the server made of each definition (its version, a partial filter).
    const again = await openMongoStore({ uri, dbName });
    await again.close();
  });

  it("claims webhook deliveries beside an index made by hand with the due index's keys", async () => {
    const { dbName, store } = await openFresh();
    const client = await MongoClient.connect(uri);
    try {
      await client
        .db(dbName)
        .collection("webhook_deliveries")
        .createIndex(
          { dueAt: 1, webhookId: 1, teamId: 1 },
          { name: "failed_due_by_hand", partialFilterExpression: { status: "failed" } },
        );
      const lease = { owner: "daemon-1", until: new Date(Date.now() + 60_000) };
      await expect(store.webhooks.claimDeliveries(lease, new Date(), 5)).resolves.toEqual([]);
    } finally {
      await client.close();
      await store.close();
    }
  });

  it("plans a webhook claim as a scan of the due index: no collection scan, no sort in memory", async () => {
    const { claimQuery } = await import("#daemon/webhooks/mongo-webhook-store.js");
    const { dbName, store } = await openFresh();
    const client = await MongoClient.connect(uri);
    try {
      const now = new Date();
      for (const full of [
        { webhookIds: [], teamIds: [] },
        { webhookIds: [randomUUID()], teamIds: [randomUUID()] },
      ]) {
        const { filter, sort, hint } = claimQuery(now, full);
        const explained = await client.db(dbName).command({
          explain: {
            findAndModify: "webhook_deliveries",
            query: filter,
            sort,
            hint,
            update: { $set: { leaseOwner: "explain" } },
          },
          verbosity: "queryPlanner",
        });
        const stages = planStages(explained.queryPlanner.winningPlan);
        expect(stages).toContainEqual({
          stage: "IXSCAN",
          indexName: "webhook_deliveries_due_by_endpoint",
        });
        expect(stages.map(({ stage }) => stage)).not.toContain("COLLSCAN");
        expect(stages.map(({ stage }) => stage)).not.toContain("SORT");
      }
    } finally {
      await client.close();
      await store.close();
    }
  });
});

/** The stages of an explained plan, classic or slot-based (its queryPlan), root first. */
function planStages(plan: Record<string, unknown>): { stage: string; indexName?: string }[] {
  const here =
    typeof plan.stage === "string"
      ? [
          {
            stage: plan.stage,
            ...(typeof plan.indexName === "string" && { indexName: plan.indexName }),
          },
        ]
      : [];
  const children = [plan.queryPlan, plan.inputStage, ...((plan.inputStages as unknown[]) ?? [])];
  return [
    ...here,
    ...children.flatMap((child) =>
      child && typeof child === "object" ? planStages(child as Record<string, unknown>) : [],
    ),
  ];
}
