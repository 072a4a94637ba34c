import type { Database } from "lmdb";
import { type ExpiryIndex, expiryKey, purgeExpiredIn } from "#daemon/store/lmdb-keys.js";
import type {
  SubjectRecord,
  SubjectStore,
  SubjectWriteResult,
} from "#daemon/subjects/subject-store.js";

/** The named databases of the subject store: records by subjectHash, and an expiry index. */
export interface LmdbSubjectDatabases {
  subjects: Database<SubjectRecord, string>;
  /** [expiresAtMs, subjectHash] → subjectHash; moved on every write, since each write sets a new expiry. */
  subjectHashesByExpiry: ExpiryIndex;
}

/** Port: a record whose expiresAt is at or before `now` is absent for every operation. */
function isLive(record: SubjectRecord | undefined, now: Date): record is SubjectRecord {
  return record !== undefined && record.expiresAt > now;
}

/**
 * SubjectStore over LMDB. write() compares versions and puts inside one write transaction, which
 * LMDB serialises across threads and processes, so racing writers see each other's result.
 */
export function createLmdbSubjectStore(dbs: LmdbSubjectDatabases): SubjectStore {
  const { subjects, subjectHashesByExpiry } = dbs;

  /** Removes the record under `subjectHash` and its index entry; must run in a write transaction. */
  function remove(subjectHash: string): SubjectRecord | undefined {
    const stored = subjects.get(subjectHash);
    if (!stored) return undefined;
    subjects.removeSync(subjectHash);
    subjectHashesByExpiry.removeSync(expiryKey(subjectHash, stored.expiresAt));
    return stored;
  }

  return {
    async find(subjectHashes, now) {
      for (const subjectHash of subjectHashes) {
        const record = subjects.get(subjectHash);
        if (isLive(record, now)) return record;
      }
      return null;
    },
    async write(next, baseVersion, now, formerHash) {
      if (next.version !== baseVersion + 1) {
        throw new RangeError(`subject version ${next.version} does not follow ${baseVersion}`);
      }
      const moved = formerHash !== undefined && formerHash !== next.subjectHash;
      return subjects.transaction((): SubjectWriteResult => {
        const here = subjects.get(next.subjectHash);
        const former = moved ? subjects.get(formerHash) : undefined;
        const live = isLive(here, now) ? here : isLive(former, now) ? former : undefined;
        if (live) {
          // Versions start at 1, so this also refuses baseVersion 0 over a live record.
          if (live.version !== baseVersion) return { outcome: "conflict", current: live };
        } else if (baseVersion > 0) {
          return { outcome: "not_found" };
        }
        remove(next.subjectHash); // an expired record is replaced, with its index entry
        if (moved) remove(formerHash); // the record leaves the older identity key
        subjects.putSync(next.subjectHash, next);
        subjectHashesByExpiry.putSync(
          expiryKey(next.subjectHash, next.expiresAt),
          next.subjectHash,
        );
        return { outcome: "written", record: structuredClone(next) };
      });
    },
    // Port: every record goes, but only live ones are counted.
    delete(subjectHashes, now) {
      return subjects.transaction(() => {
        let live = 0;
        for (const subjectHash of subjectHashes) {
          if (isLive(remove(subjectHash), now)) live++;
        }
        return live;
      });
    },
    purgeExpired(now) {
      return purgeExpiredIn(subjects, subjectHashesByExpiry, now, (subjectHash) => {
        if (isLive(subjects.get(subjectHash), now)) return false;
        return remove(subjectHash) !== undefined;
      });
    },
    async keysInUse(keyIds) {
      const some = (range: { start?: string; end?: string }) => {
        for (const _ of subjects.getKeys({ ...range, limit: 1 })) return true;
        return false;
      };
      return {
        any: some({}),
        // ';' follows ':', so the range holds exactly the hashes beginning `<key id>:`.
        underKeys: keyIds.some((id) => some({ start: `${id}:`, end: `${id};` })),
      };
    },
  };
}
