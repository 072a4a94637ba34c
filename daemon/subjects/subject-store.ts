import type { JsonObject } from "@bufbuild/protobuf";

/**
 * The stored consent state of one subject (spec 2.3). The subject id itself is never stored:
 * `subjectHash` is an HMAC of (team, banner, namespace, subject id) tagged with the identity key's
 * id (decisions §4).
 */
export interface SubjectRecord {
  /** "<identity key id>:<HMAC>"; unique. */
  subjectHash: string;
  teamId: string;
  /** Internal banner id. */
  bannerId: string;
  /** Canonical consent state (spec 2.4), exactly as validated. */
  consentState: JsonObject;
  protocolVersion: number;
  version: number;
  /** The written consentState.lastConsentTimestamp, as the client sent it. */
  clientUpdatedAt: string;
  updatedAt: Date;
  expiresAt: Date;
}

export type SubjectWriteResult =
  | { outcome: "written"; record: SubjectRecord }
  /** The live record's version differs from baseVersion; `current` is that record. */
  | { outcome: "conflict"; current: SubjectRecord }
  /** baseVersion > 0 but no live record exists. */
  | { outcome: "not_found" };

/**
 * Storage port for subject records. A record whose expiresAt is at or before `now` is absent for
 * every operation (decisions §4) until purgeExpired removes it.
 */
export interface SubjectStore {
  /** The live record stored under any of `subjectHashes` (tried in order), or null. */
  find(subjectHashes: readonly string[], now: Date): Promise<SubjectRecord | null>;
  /**
   * Stores `next` under next.subjectHash (next.version must be baseVersion + 1):
   * - baseVersion 0: succeeds when no live record exists under that hash (an expired one is
   *   replaced); otherwise conflict with the live record.
   * - baseVersion > 0: succeeds when the live record's version equals baseVersion; conflict when
   *   it differs; not_found when there is no live record.
   * Under concurrent writes with the same baseVersion exactly one succeeds and every other one
   * reports conflict with a current record at least as new as the winner's.
   *
   * With `formerHash` (the subject's hash under an older identity key, where its record was
   * found), the record compared is the live one under next.subjectHash, else the live one under
   * formerHash; a write that succeeds stores `next` under next.subjectHash and removes the record
   * under formerHash in the same atomic step, so a rotation of the identity key ends once every
   * record has been written again or has expired (decisions §4). A MongoDB deployment without
   * transactions (a standalone server) cannot make that step atomic: there the record is
   * written where it was found, under formerHash, as `record.subjectHash` then says.
   */
  write(
    next: SubjectRecord,
    baseVersion: number,
    now: Date,
    formerHash?: string,
  ): Promise<SubjectWriteResult>;
  /**
   * Removes every record under `subjectHashes` (newest identity key first, as find() takes them);
   * returns how many of them were live. A write moving the record to a newer key's hash at the
   * same time cannot leave it behind.
   */
  delete(subjectHashes: readonly string[], now: Date): Promise<number>;
  /** Removes records whose expiry is at or before `now`; returns how many. */
  purgeExpired(now: Date): Promise<number>;
  /**
   * Whether any record is stored (live or not yet purged) at all, and whether any is under one of
   * `keyIds`: its subjectHash begins `<key id>:` (SubjectIdentity). Each answered from the first
   * record found, not by counting.
   */
  keysInUse(keyIds: readonly string[]): Promise<{ any: boolean; underKeys: boolean }>;
}
