import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ApiKeyRecord } from "#daemon/keys/key-store.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { type CachedStore, READ_CACHE_TTL_MS, withReadCache } from "#daemon/store/read-cache.js";
import type { Store } from "#daemon/store/store.js";

function aKey(teamId: string): ApiKeyRecord {
  return {
    id: randomUUID(),
    teamId,
    environment: "live",
    name: "cached",
    scopes: ["consent:read"],
    keyHash: randomUUID().replaceAll("-", "").repeat(2),
    hint: "ck_live_…abcd",
    createdAt: new Date(),
    expiresAt: null,
    revokedAt: null,
  };
}

describe("the daemon's read cache (docs/behaviour.md, Caching)", () => {
  let dataDir: string;
  /** The store behind the cache; writing to it directly stands for another daemon's writes. */
  let store: Store;
  let other: Store;
  let clockMs = 0;
  let cached: CachedStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-read-cache-"));
    store = await openLmdbStore({ dataDir });
    other = store;
    clockMs = 0;
    cached = withReadCache(store, { now: () => clockMs });
  });
  afterEach(async () => {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /**
   * A key inserted through `writer`, read (and so cached) unrevoked through the cache, then
   * revoked through `writer`; `revokedAt()` is what the cache now answers.
   */
  async function revokedAfterCaching(writer: Store) {
    const key = aKey(randomUUID());
    await writer.keys.insert(key);
    const revokedAt = async () => (await cached.keys.findByHash(key.keyHash))?.revokedAt;
    expect(await revokedAt()).toBeNull();
    const at = new Date();
    await writer.keys.revoke(key.id, at);
    return { at, revokedAt };
  }

  it("sees its own revocation at once", async () => {
    const { at, revokedAt } = await revokedAfterCaching(cached);
    expect(await revokedAt()).toEqual(at);
  });

  it("sees another daemon's revocation once the TTL has passed, not later", async () => {
    const { at, revokedAt } = await revokedAfterCaching(other);
    clockMs += READ_CACHE_TTL_MS - 1;
    expect(await revokedAt()).toBeNull();
    clockMs += 1;
    expect(await revokedAt()).toEqual(at);
  });

  it("sees another daemon's write at once when told of it (a relayed publish)", async () => {
    const { at, revokedAt } = await revokedAfterCaching(other);
    cached.forgetCachedReads();
    expect(await revokedAt()).toEqual(at);
  });

  it("sees a revocation another process stored just before it was told, though it read the store a moment before (a relayed write)", async () => {
    const key = aKey(randomUUID());
    await store.keys.insert(key);
    // This process reads the store, as a request served just before the relay arrives does…
    expect(await store.keys.get(key.id)).not.toBeNull();
    // …then, before its next timer, another worker of npm start revokes the key and says so.
    const second = fileURLToPath(new URL("./lmdb-second-process.ts", import.meta.url));
    execFileSync(process.execPath, ["--import", "tsx", second, dataDir, "revoke-key", key.id], {
      input: "go\n",
    });
    cached.forgetCachedReads();
    const revokedAt = async () => (await cached.keys.findByHash(key.keyHash))?.revokedAt;
    expect(await revokedAt()).toBeInstanceOf(Date);
    await sleep(10);
    expect(await revokedAt()).toBeInstanceOf(Date);
  });

  it("finds a key another daemon minted at once (absence is never cached)", async () => {
    const key = aKey(randomUUID());
    expect(await cached.keys.findByHash(key.keyHash)).toBeNull();
    await other.keys.insert(key);
    expect((await cached.keys.findByHash(key.keyHash))?.id).toBe(key.id);
  });

  it("follows its own plan change at once", async () => {
    const team = {
      id: randomUUID(),
      name: "Cached",
      plan: "free",
      createdAt: new Date(),
      updatedAt: new Date(),
    };
    await cached.teams.insert(team);
    expect((await cached.teams.get(team.id))?.plan).toBe("free");
    await cached.teams.setPlan(team.id, "enterprise", new Date());
    expect((await cached.teams.get(team.id))?.plan).toBe("enterprise");
  });

  it("passes every other part of the store through", async () => {
    expect(cached.kind).toBe("lmdb");
    await cached.ping();
    const name = `counter:${randomUUID()}`;
    const now = new Date();
    await cached.counters.increment(name, new Date(now.getTime() + 60_000), now);
    expect(await other.counters.get(name, now)).toBe(1);
  });
});
