import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  aheadOfTtlMonitor,
  DAY,
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";
import type { SubjectRecord } from "#daemon/subjects/subject-store.js";

/** A subject record written at `updatedAt`, live for a day unless `expiresAt` says otherwise. */
export function aSubject(
  subjectHash: string,
  version: number,
  updatedAt: Date,
  expiresAt = shifted(updatedAt, DAY),
): SubjectRecord {
  const lastConsentTimestamp = updatedAt.toISOString();
  return {
    subjectHash,
    teamId: "team-1",
    bannerId: "banner-1",
    consentState: {
      preferences: { necessary: true, analytics: version % 2 === 0 },
      lastConsentTimestamp,
    },
    protocolVersion: 1,
    version,
    clientUpdatedAt: lastConsentTimestamp,
    updatedAt,
    expiresAt,
  };
}

function aHash(): string {
  return `ik_1:${randomUUID()}`;
}

/** The SubjectStore promises (daemon/subjects/subject-store.ts), for any adapter. */
export function describeSubjectStoreContract(openStore: OpenStore): void {
  describe("SubjectStore contract", () => {
    const store = useFreshStore(openStore);
    const now = aheadOfTtlMonitor();
    const past = shifted(now, -2 * DAY);

    it("tells whether any record is stored, and whether any is under the given key ids", async () => {
      const subjects = store().subjects;
      expect(await subjects.keysInUse(["a1b2"])).toEqual({ any: false, underKeys: false });
      await subjects.write(aSubject(`a1b2c3:${randomUUID()}`, 1, now), 0, now);
      // A key id that is another's prefix is not that key.
      expect(await subjects.keysInUse(["a1b2"])).toEqual({ any: true, underKeys: false });
      expect(await subjects.keysInUse([])).toEqual({ any: true, underKeys: false });
      expect(await subjects.keysInUse(["ffff", "a1b2c3"])).toEqual({ any: true, underKeys: true });
      // An expired record not yet purged still says which key made it.
      await writeExpired(`d4e5f6:${randomUUID()}`);
      expect(await subjects.keysInUse(["d4e5f6"])).toEqual({ any: true, underKeys: true });
    });

    /** Stores versions 1…`version` of a record, written in the past; the last expired a minute before `now`. */
    async function writeExpired(subjectHash: string, version = 1) {
      for (let v = 1; v <= version; v++) {
        const record = aSubject(subjectHash, v, past, shifted(now, -MINUTE));
        expect((await store().subjects.write(record, v - 1, past)).outcome).toBe("written");
      }
      expect(await store().subjects.find([subjectHash], past)).not.toBeNull();
    }

    it("stores a first write (baseVersion 0) and finds it", async () => {
      const record = aSubject(aHash(), 1, now);
      expect(await store().subjects.write(record, 0, now)).toEqual({ outcome: "written", record });
      const found = await store().subjects.find([record.subjectHash], now);
      expect(found).toEqual(record);
      expect(found?.expiresAt).toBeInstanceOf(Date);
    });

    it("writes over a live record whose version is the baseVersion", async () => {
      const hash = aHash();
      await store().subjects.write(aSubject(hash, 1, now), 0, now);
      const next = aSubject(hash, 2, shifted(now, MINUTE));
      expect(await store().subjects.write(next, 1, now)).toEqual({
        outcome: "written",
        record: next,
      });
      expect(await store().subjects.find([hash], now)).toEqual(next);
    });

    it("reports a conflict with the live record on a stale baseVersion", async () => {
      const hash = aHash();
      const first = aSubject(hash, 1, now);
      await store().subjects.write(first, 0, now);
      const second = aSubject(hash, 2, now);
      await store().subjects.write(second, 1, now);
      const stale = await store().subjects.write(aSubject(hash, 2, now), 1, now);
      expect(stale).toEqual({ outcome: "conflict", current: second });
      const fresh = await store().subjects.write(aSubject(hash, 1, now), 0, now);
      expect(fresh).toEqual({ outcome: "conflict", current: second });
    });

    it("reports not_found for baseVersion > 0 when there is no record", async () => {
      expect(await store().subjects.write(aSubject(aHash(), 4, now), 3, now)).toEqual({
        outcome: "not_found",
      });
    });

    it("treats an expired record as absent for find, write and delete", async () => {
      const hash = aHash();
      await writeExpired(hash, 3);
      expect(await store().subjects.find([hash], now)).toBeNull();
      expect(await store().subjects.write(aSubject(hash, 4, now), 3, now)).toEqual({
        outcome: "not_found",
      });
      expect(await store().subjects.delete([hash], now)).toBe(0);
    });

    it("replaces an expired record with a baseVersion 0 write", async () => {
      const hash = aHash();
      await writeExpired(hash, 3);
      const record = aSubject(hash, 1, now);
      expect(await store().subjects.write(record, 0, now)).toEqual({ outcome: "written", record });
      expect(await store().subjects.find([hash], now)).toEqual(record);
    });

    it("finds the first live record among the hashes, in order", async () => {
      const [expired, first, second] = [aHash(), aHash(), aHash()];
      await writeExpired(expired);
      await store().subjects.write(aSubject(first, 1, now), 0, now);
      await store().subjects.write(aSubject(second, 1, now), 0, now);
      expect(
        (await store().subjects.find([aHash(), expired, second, first], now))?.subjectHash,
      ).toBe(second);
      expect(await store().subjects.find([], now)).toBeNull();
    });

    it("deletes every record under the hashes and counts only the live ones", async () => {
      const [expired, live, other] = [aHash(), aHash(), aHash()];
      await writeExpired(expired);
      await store().subjects.write(aSubject(live, 1, now), 0, now);
      await store().subjects.write(aSubject(other, 1, now), 0, now);
      expect(await store().subjects.delete([expired, live, aHash()], now)).toBe(1);
      expect(await store().subjects.find([live], now)).toBeNull();
      expect(await store().subjects.purgeExpired(now)).toBe(0); // the expired one went too
      expect(await store().subjects.find([other], now)).not.toBeNull();
    });

    it("purges records expired at or before now and counts them", async () => {
      const [expired, expiringNow, live] = [aHash(), aHash(), aHash()];
      await writeExpired(expired);
      await store().subjects.write(aSubject(expiringNow, 1, past, now), 0, past);
      await store().subjects.write(aSubject(live, 1, now), 0, now);
      expect(await store().subjects.purgeExpired(now)).toBe(2);
      expect(await store().subjects.purgeExpired(now)).toBe(0);
      expect(await store().subjects.find([live], now)).not.toBeNull();
      expect(await store().subjects.write(aSubject(expired, 2, now), 1, now)).toEqual({
        outcome: "not_found",
      });
    });

    describe("a write given the record's hash under an older identity key (formerHash)", () => {
      /** A record found under `former` (an older key's hash) and the subject's hash under `current`. */
      async function foundUnderOlderKey() {
        const id = randomUUID();
        const former = aSubject(`ik_1:${id}`, 1, now);
        await store().subjects.write(former, 0, now);
        return { former, current: `ik_2:${id}` };
      }

      /**
       * Where a successful write left the record: under the current hash, nothing under the former
       * one; a MongoDB server without transactions writes it where it was found (the port says so).
       */
      async function expectStored(record: SubjectRecord, current: string, former: string) {
        const inPlace = store().kind === "mongodb" && record.subjectHash === former;
        expect(record.subjectHash).toBe(inPlace ? former : current);
        expect(await store().subjects.find([current, former], now)).toEqual(record);
        expect(await store().subjects.find([inPlace ? current : former], now)).toBeNull();
      }

      it("compares the record found under it, then moves it under the current hash", async () => {
        const { former, current } = await foundUnderOlderKey();
        const next = aSubject(current, 2, shifted(now, MINUTE));
        const result = await store().subjects.write(next, 1, now, former.subjectHash);
        expect(result.outcome).toBe("written");
        if (result.outcome !== "written") return;
        expect({ ...result.record, subjectHash: current }).toEqual(next);
        await expectStored(result.record, current, former.subjectHash);
      });

      it("reports a conflict with the record under it on a stale baseVersion, and moves nothing", async () => {
        const { former, current } = await foundUnderOlderKey();
        const stale = await store().subjects.write(
          aSubject(current, 3, now),
          2,
          now,
          former.subjectHash,
        );
        expect(stale).toEqual({ outcome: "conflict", current: former });
        expect(await store().subjects.find([current], now)).toBeNull();
        expect(await store().subjects.find([former.subjectHash], now)).toEqual(former);
      });

      it("compares the live record under the current hash first, and removes the former one", async () => {
        const { former, current } = await foundUnderOlderKey();
        // A MongoDB server without transactions compares and writes the record where it was found
        // (the port says so), which the service only names when the current hash holds none.
        const probe = await foundUnderOlderKey();
        const moved = await store().subjects.write(
          aSubject(probe.current, 2, now),
          1,
          now,
          probe.former.subjectHash,
        );
        if (moved.outcome === "written" && moved.record.subjectHash !== probe.current) {
          expect(store().kind).toBe("mongodb");
          return;
        }
        // Version 2 under the current hash, beside version 1 under the former one.
        await store().subjects.write(aSubject(current, 1, now), 0, now);
        const newer = aSubject(current, 2, now);
        await store().subjects.write(newer, 1, now);
        // The former record's version is stale against it.
        expect(
          await store().subjects.write(aSubject(current, 2, now), 1, now, former.subjectHash),
        ).toEqual({ outcome: "conflict", current: newer });
        const result = await store().subjects.write(
          aSubject(current, 3, now),
          2,
          now,
          former.subjectHash,
        );
        expect(result).toMatchObject({ outcome: "written", record: { version: 3 } });
        if (result.outcome === "written") {
          await expectStored(result.record, current, former.subjectHash);
        }
      });

      it("reports not_found for baseVersion > 0 when neither hash holds a live record", async () => {
        const id = randomUUID();
        await writeExpired(`ik_1:${id}`);
        expect(
          await store().subjects.write(aSubject(`ik_2:${id}`, 2, now), 1, now, `ik_1:${id}`),
        ).toEqual({ outcome: "not_found" });
      });

      it("lets exactly one of 20 concurrent moving writes succeed; the others conflict with it", async () => {
        const { former, current } = await foundUnderOlderKey();
        const attempts = Array.from({ length: 20 }, (_, i) =>
          aSubject(current, 2, shifted(now, i)),
        );
        const results = await Promise.all(
          attempts.map((next) => store().subjects.write(next, 1, now, former.subjectHash)),
        );
        const written = results.filter((r) => r.outcome === "written");
        expect(written).toHaveLength(1);
        const winner = written[0]?.outcome === "written" ? written[0].record : undefined;
        if (!winner) return;
        for (const result of results.filter((r) => r.outcome !== "written")) {
          expect(result).toEqual({ outcome: "conflict", current: winner });
        }
        await expectStored(winner, current, former.subjectHash);
      });
    });

    it.each([0, 5])(
      "lets exactly one of 20 concurrent writes with baseVersion %i succeed",
      async (baseVersion) => {
        const hash = aHash();
        if (baseVersion > 0) {
          await writeExpired(hash, 1); // an expired record must not change the race
          for (let v = 1; v <= baseVersion; v++) {
            const result = await store().subjects.write(aSubject(hash, v, now), v - 1, now);
            expect(result.outcome).toBe("written");
          }
        }
        // Each attempt differs (updatedAt), so the stored record names the winner.
        const attempts = Array.from({ length: 20 }, (_, i) =>
          aSubject(hash, baseVersion + 1, shifted(now, i)),
        );
        const results = await Promise.all(
          attempts.map((next) => store().subjects.write(next, baseVersion, now)),
        );
        const written = results.filter((r) => r.outcome === "written");
        expect(written).toHaveLength(1);
        const winner = written[0]?.outcome === "written" ? written[0].record : undefined;
        for (const result of results.filter((r) => r.outcome !== "written")) {
          expect(result).toEqual({ outcome: "conflict", current: winner });
        }
        expect(await store().subjects.find([hash], now)).toEqual(winner);
      },
    );
  });
}
