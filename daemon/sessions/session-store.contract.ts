import { createHash, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { SessionRecord } from "#daemon/sessions/session-store.js";
import { DuplicateKeyError } from "#daemon/store/store.js";
import {
  aheadOfTtlMonitor,
  DAY,
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";

export function aSession(createdAt: Date, expiresAt: Date, tokenHash?: string): SessionRecord {
  return {
    id: randomUUID(),
    teamId: randomUUID(),
    tokenHash: tokenHash ?? createHash("sha256").update(randomUUID()).digest("hex"),
    createdAt,
    expiresAt,
    revokedAt: null,
  };
}

/** The SessionStore promises (daemon/sessions/session-store.ts), for any adapter. */
export function describeSessionStoreContract(openStore: OpenStore): void {
  describe("SessionStore contract", () => {
    const store = useFreshStore(openStore);
    const now = aheadOfTtlMonitor();

    it("finds an inserted session by id and by token hash", async () => {
      const session = aSession(now, shifted(now, DAY));
      await store().sessions.insert(session);
      expect(await store().sessions.get(session.id, now)).toEqual(session);
      const found = await store().sessions.findByHash(session.tokenHash, now);
      expect(found).toEqual(session);
      expect(found?.expiresAt).toBeInstanceOf(Date);
    });

    it("returns null for an unknown id or token hash", async () => {
      expect(await store().sessions.get(randomUUID(), now)).toBeNull();
      expect(await store().sessions.findByHash("0".repeat(64), now)).toBeNull();
    });

    it("rejects a second session with the same tokenHash or id", async () => {
      const session = aSession(now, shifted(now, DAY));
      await store().sessions.insert(session);
      const sameHash = aSession(now, shifted(now, DAY), session.tokenHash);
      await expect(store().sessions.insert(sameHash)).rejects.toBeInstanceOf(DuplicateKeyError);
      const sameId = { ...aSession(now, shifted(now, DAY)), id: session.id };
      await expect(store().sessions.insert(sameId)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect((await store().sessions.findByHash(session.tokenHash, now))?.id).toBe(session.id);
    });

    it("revokes a session once: the first revocation time stays", async () => {
      const session = aSession(now, shifted(now, DAY));
      await store().sessions.insert(session);
      const first = shifted(now, MINUTE);
      expect(await store().sessions.revoke(session.id, first)).toEqual({
        ...session,
        revokedAt: first,
      });
      const again = await store().sessions.revoke(session.id, shifted(now, 2 * MINUTE));
      expect(again?.revokedAt).toEqual(first);
      expect((await store().sessions.get(session.id, now))?.revokedAt).toEqual(first);
    });

    it("treats a session as absent from its expiry on, before any purge: reads, and a revocation, which changes nothing", async () => {
      const session = aSession(shifted(now, -DAY), now);
      await store().sessions.insert(session);
      const before = shifted(now, -1);
      expect(await store().sessions.get(session.id, before)).toEqual(session);
      expect(await store().sessions.findByHash(session.tokenHash, before)).toEqual(session);
      for (const at of [now, shifted(now, MINUTE)]) {
        expect(await store().sessions.get(session.id, at)).toBeNull();
        expect(await store().sessions.findByHash(session.tokenHash, at)).toBeNull();
        expect(await store().sessions.revoke(session.id, at)).toBeNull();
      }
      // Still stored until the purge, and not revoked by the refused revocation.
      expect(await store().sessions.get(session.id, before)).toEqual(session);
      expect(await store().sessions.purgeExpired(now)).toBe(1);
    });

    it("returns null when revoking an unknown session", async () => {
      expect(await store().sessions.revoke(randomUUID(), now)).toBeNull();
    });

    it("lists a team's unexpired sessions, revoked ones included, newest first", async () => {
      const teamId = randomUUID();
      const ofTeam = (createdAt: Date, expiresAt: Date) => ({
        ...aSession(createdAt, expiresAt),
        teamId,
      });
      const older = ofTeam(shifted(now, -2 * MINUTE), shifted(now, DAY));
      const newer = ofTeam(shifted(now, -MINUTE), shifted(now, DAY));
      const revoked = ofTeam(shifted(now, -3 * MINUTE), shifted(now, DAY));
      const expired = ofTeam(shifted(now, -DAY), now);
      const otherTeam = aSession(now, shifted(now, DAY));
      for (const session of [older, newer, revoked, expired, otherTeam]) {
        await store().sessions.insert(session);
      }
      const revokedAt = shifted(now, -MINUTE);
      await store().sessions.revoke(revoked.id, revokedAt);
      expect(await store().sessions.listByTeam(teamId, now)).toEqual([
        newer,
        older,
        { ...revoked, revokedAt },
      ]);
      expect(await store().sessions.listByTeam(randomUUID(), now)).toEqual([]);
    });

    it("purges sessions expired at or before now and counts them", async () => {
      const expired = aSession(shifted(now, -DAY), shifted(now, -MINUTE));
      const expiringNow = aSession(shifted(now, -DAY), now);
      const live = aSession(now, shifted(now, MINUTE));
      for (const session of [expired, expiringNow, live]) await store().sessions.insert(session);
      expect(await store().sessions.purgeExpired(now)).toBe(2);
      const before = shifted(now, -DAY);
      expect(await store().sessions.get(expired.id, before)).toBeNull();
      expect(await store().sessions.findByHash(expiringNow.tokenHash, before)).toBeNull();
      expect(await store().sessions.get(live.id, now)).toEqual(live);
      expect(await store().sessions.purgeExpired(now)).toBe(0);
    });
  });
}
