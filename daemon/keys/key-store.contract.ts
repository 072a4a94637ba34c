import { createHash, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { type ApiKeyRecord, keyExpired } from "#daemon/keys/key-store.js";
import { DuplicateKeyError } from "#daemon/store/store.js";
import {
  DAY,
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";

export function aKey(
  teamId: string,
  createdAt: Date,
  overrides: Partial<ApiKeyRecord> = {},
): ApiKeyRecord {
  return {
    id: randomUUID(),
    teamId,
    environment: "live",
    name: "server",
    scopes: ["banners:read", "consent:write"],
    keyHash: createHash("sha256").update(randomUUID()).digest("hex"),
    hint: "ck_live_…abcd",
    createdAt,
    expiresAt: null,
    revokedAt: null,
    ...overrides,
  };
}

/** The KeyStore promises (daemon/keys/key-store.ts), for any adapter. */
export function describeKeyStoreContract(openStore: OpenStore): void {
  describe("KeyStore contract", () => {
    const store = useFreshStore(openStore);
    const now = new Date();
    const teamId = randomUUID();

    it("finds an inserted key by id and by hash", async () => {
      const key = aKey(teamId, now, { expiresAt: shifted(now, DAY) });
      await store().keys.insert(key);
      expect(await store().keys.get(key.id)).toEqual(key);
      const found = await store().keys.findByHash(key.keyHash);
      expect(found).toEqual(key);
      expect(found?.expiresAt).toBeInstanceOf(Date);
    });

    it("returns null for an unknown id or hash", async () => {
      expect(await store().keys.get(randomUUID())).toBeNull();
      expect(await store().keys.findByHash("0".repeat(64))).toBeNull();
    });

    it("rejects a second key with the same keyHash and keeps the first", async () => {
      const key = aKey(teamId, now);
      await store().keys.insert(key);
      const clash = aKey(teamId, now, { keyHash: key.keyHash });
      await expect(store().keys.insert(clash)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect((await store().keys.findByHash(key.keyHash))?.id).toBe(key.id);
      expect(await store().keys.get(clash.id)).toBeNull();
    });

    it("rejects a second key with the same id", async () => {
      const key = aKey(teamId, now);
      await store().keys.insert(key);
      await expect(store().keys.insert(aKey(teamId, now, { id: key.id }))).rejects.toBeInstanceOf(
        DuplicateKeyError,
      );
    });

    it("lists a team's keys newest first, and only that team's", async () => {
      const keys = [aKey(teamId, now), aKey(teamId, shifted(now, 2 * MINUTE))];
      keys.push(aKey(teamId, shifted(now, MINUTE)));
      for (const key of keys) await store().keys.insert(key);
      await store().keys.insert(aKey(randomUUID(), now));
      const listed = await store().keys.listByTeam(teamId);
      expect(listed.map((k) => k.id)).toEqual([keys[1], keys[2], keys[0]].map((k) => k?.id));
      expect(await store().keys.listByTeam(randomUUID())).toEqual([]);
    });

    it("says whether it holds any key, revoked ones included", async () => {
      expect(await store().keys.holdsAny()).toBe(false);
      const key = aKey(teamId, now);
      await store().keys.insert(key);
      await store().keys.revoke(key.id, now);
      expect(await store().keys.holdsAny()).toBe(true);
    });

    it("revokes a key once: the first revocation time stays", async () => {
      const key = aKey(teamId, now);
      await store().keys.insert(key);
      const first = shifted(now, MINUTE);
      expect(await store().keys.revoke(key.id, first)).toEqual({ ...key, revokedAt: first });
      const again = await store().keys.revoke(key.id, shifted(now, 2 * MINUTE));
      expect(again?.revokedAt).toEqual(first);
      expect((await store().keys.get(key.id))?.revokedAt).toEqual(first);
    });

    /** A rotation at `now` toward a new key id, its grace period ending at `graceEnd`. */
    const replacement = (graceEnd: Date) => ({ replacedBy: randomUUID(), at: now, graceEnd });

    it("retires a key once: marks its replacement and moment, and sets an expiry on a key that has none", async () => {
      const key = aKey(teamId, now);
      await store().keys.insert(key);
      const rotation = replacement(shifted(now, DAY));
      const retired = await store().keys.retire(key.id, rotation);
      expect(retired).toEqual({
        ...key,
        expiresAt: rotation.graceEnd,
        replacedBy: rotation.replacedBy,
        replacedAt: now,
      });
      expect(await store().keys.get(key.id)).toEqual(retired);
      expect(await store().keys.retire(key.id, replacement(shifted(now, MINUTE)))).toBeNull();
      expect(await store().keys.get(key.id)).toEqual(retired);
    });

    it("keeps the current expiry when it is earlier than the rotation's", async () => {
      const key = aKey(teamId, now, { expiresAt: shifted(now, DAY) });
      await store().keys.insert(key);
      const kept = await store().keys.retire(key.id, replacement(shifted(now, 2 * DAY)));
      expect(kept?.expiresAt).toEqual(key.expiresAt);
      const other = aKey(teamId, now, { expiresAt: shifted(now, DAY) });
      await store().keys.insert(other);
      const earlier = shifted(now, MINUTE);
      expect((await store().keys.retire(other.id, replacement(earlier)))?.expiresAt).toEqual(
        earlier,
      );
    });

    // Regression: a key rotated with no grace period was stored expiring at the rotating
    // daemon's now, which a daemon whose clock is behind read as a time still to come.
    it("stores a key retired with no grace period as expired whatever a reader's clock says", async () => {
      const [stopped, graced] = [aKey(teamId, now), aKey(teamId, now)];
      for (const key of [stopped, graced]) await store().keys.insert(key);
      await store().keys.retire(stopped.id, replacement(now));
      await store().keys.retire(graced.id, replacement(shifted(now, MINUTE)));
      const [readStopped, readGraced] = await Promise.all(
        [stopped, graced].map(async ({ keyHash }) => store().keys.findByHash(keyHash)),
      );
      const behind = shifted(now, -MINUTE);
      expect(readStopped && keyExpired(readStopped, behind)).toBe(true);
      expect(readGraced && keyExpired(readGraced, behind)).toBe(false);
      expect(readGraced && keyExpired(readGraced, shifted(now, MINUTE))).toBe(true);
    });

    it("lets one of two racing rotations retire a key, and none retire a revoked one", async () => {
      const key = aKey(teamId, now);
      await store().keys.insert(key);
      const outcomes = await Promise.all(
        [replacement(now), replacement(now)].map((rotation) =>
          store().keys.retire(key.id, rotation),
        ),
      );
      expect(outcomes.filter((outcome) => outcome !== null)).toHaveLength(1);
      const revoked = aKey(teamId, now);
      await store().keys.insert(revoked);
      await store().keys.revoke(revoked.id, now);
      expect(await store().keys.retire(revoked.id, replacement(now))).toBeNull();
      expect((await store().keys.get(revoked.id))?.replacedBy).toBeUndefined();
    });

    it("returns null when revoking or retiring an unknown key", async () => {
      expect(await store().keys.revoke(randomUUID(), now)).toBeNull();
      expect(await store().keys.retire(randomUUID(), replacement(now))).toBeNull();
    });
  });
}
