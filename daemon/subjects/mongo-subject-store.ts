import { setTimeout as sleep } from "node:timers/promises";
import {
  type ClientSession,
  type Collection,
  type Filter,
  type IndexDescription,
  type MongoClient,
  MongoError,
  MongoNetworkError,
  MongoServerError,
  type WithId,
} from "mongodb";
import {
  duplicateKeyError,
  isDuplicateKey,
  isDuplicateKeyOn,
  READ_LATEST,
} from "#daemon/store/mongo-writes.js";
import type {
  SubjectRecord,
  SubjectStore,
  SubjectWriteResult,
} from "#daemon/subjects/subject-store.js";

/** A subject record as stored in MongoDB: `_id` is the subjectHash, which makes it unique. */
export type SubjectDocument = Omit<SubjectRecord, "subjectHash"> & { _id: string };

/**
 * How many times write() starts over when the document changed between its two steps (it was
 * deleted, or re-created at the caller's base version). Each retry needs another writer to win a
 * race in between, so a handful is plenty; beyond it the write fails rather than spin.
 */
const MAX_WRITE_ATTEMPTS = 5;

/** The server's answer to a transaction on a standalone server ("IllegalOperation"). */
const ILLEGAL_OPERATION = 20;

/**
 * SubjectStore over the `subjects` collection, without transactions: every write is one
 * conditional single-document operation, so the server's per-document atomicity decides races.
 * A document whose expiresAt is at or before `now` is absent (decisions §4) even before the TTL
 * monitor (about once a minute) removes it.
 */
export class MongoSubjectStore implements SubjectStore {
  static readonly indexes: IndexDescription[] = [
    { key: { expiresAt: 1 }, name: "subjects_expiry", expireAfterSeconds: 0 },
  ];

  /** False once the deployment refused a transaction: a standalone server never takes one. */
  private transactions = true;

  constructor(
    private readonly collection: Collection<SubjectDocument>,
    private readonly client: MongoClient,
  ) {}

  async find(subjectHashes: readonly string[], now: Date): Promise<SubjectRecord | null> {
    if (subjectHashes.length === 0) return null;
    const documents = await this.collection
      .find({ _id: { $in: [...subjectHashes] }, expiresAt: { $gt: now } })
      .toArray();
    // The port's order decides which hash wins, not the server's return order.
    for (const subjectHash of subjectHashes) {
      const document = documents.find((candidate) => candidate._id === subjectHash);
      if (document) return toRecord(document);
    }
    return null;
  }

  async write(
    next: SubjectRecord,
    baseVersion: number,
    now: Date,
    formerHash?: string,
  ): Promise<SubjectWriteResult> {
    if (!Number.isInteger(baseVersion) || baseVersion < 0 || next.version !== baseVersion + 1) {
      throw new RangeError(
        `subject version ${next.version} must be baseVersion ${baseVersion} + 1`,
      );
    }
    if (formerHash !== undefined && formerHash !== next.subjectHash) {
      const moved = this.transactions && (await this.move(next, baseVersion, now, formerHash));
      if (moved) return moved;
      // No transactions here: the record is written where it was found.
      return this.write({ ...next, subjectHash: formerHash }, baseVersion, now);
    }
    for (let attempt = 1; attempt <= MAX_WRITE_ATTEMPTS; attempt++) {
      const result =
        baseVersion === 0
          ? await this.create(next, now)
          : await this.advance(next, baseVersion, now);
      if (result) return result;
    }
    throw new Error(`subject write did not settle after ${MAX_WRITE_ATTEMPTS} attempts`);
  }

  async delete(subjectHashes: readonly string[], now: Date): Promise<number> {
    // One findOneAndDelete per hash: each reports exactly the document it removed, so the count of
    // live ones is exact even when a write races the delete. The oldest key's hash first, one
    // after another: a write moving the record to the newest key's hash (move()) then either
    // finds it gone, or has moved it before the delete reaches that hash.
    let live = 0;
    for (const _id of [...new Set(subjectHashes)].reverse()) {
      const document = await this.collection.findOneAndDelete({ _id });
      if (document !== null && document.expiresAt > now) live++;
    }
    return live;
  }

  async purgeExpired(now: Date): Promise<number> {
    const { deletedCount } = await this.collection.deleteMany({ expiresAt: { $lte: now } });
    return deletedCount;
  }

  async keysInUse(keyIds: readonly string[]): Promise<{ any: boolean; underKeys: boolean }> {
    const some = async (filter: Filter<SubjectDocument>) =>
      (await this.collection.findOne(filter, { projection: { _id: 1 } })) !== null;
    // The _id index answers each range at once: ';' follows ':', so a range holds exactly the
    // hashes beginning `<key id>:`.
    const under = keyIds.map((id) => ({ _id: { $gte: `${id}:`, $lt: `${id};` } }));
    const [any, underKeys] = await Promise.all([
      some({}),
      under.length > 0 ? some({ $or: under }) : Promise.resolve(false),
    ]);
    return { any, underKeys };
  }

  /**
   * baseVersion 0: insert; a duplicate `_id` means a document exists. Replace it only if it has
   * expired; else conflict with the live one. Null when it vanished in between: start over. A
   * duplicate on another unique index is no such race: starting over would meet it again, so it
   * fails the write as the port's DuplicateKeyError.
   *
   * A duplicate key is a conflict only once the server has confirmed the state it met: after a
   * failed write MongoDB waits for the write concern up to its latest write, the conflicting
   * document's included. A reply carrying both the duplicate and a write concern error (its
   * majority past wtimeout, code 64) reaches the driver as a MongoWriteConcernError, code 64, the
   * duplicate only in its result's writeErrors: isDuplicateKey does not take it, and the write
   * fails as unavailable (503). The insert did not happen, but the document it met may be the
   * primary's alone, which a failover rolls back; a 409 would have the client merge onto that.
   * Its retry (spec 7) meets the state that stood: a conflict, or a first write.
   */
  private async create(next: SubjectRecord, now: Date): Promise<SubjectWriteResult | null> {
    const { _id, ...replacement } = toDocument(next);
    try {
      await this.collection.insertOne({ _id, ...replacement });
      return { outcome: "written", record: structuredClone(next) };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      if (!isDuplicateKeyOn(error, "_id", "_id_")) throw duplicateKeyError(error, "subject");
    }
    const replaced = await this.collection.findOneAndReplace(
      { _id, expiresAt: { $lte: now } },
      replacement,
      { returnDocument: "after" },
    );
    if (replaced) return { outcome: "written", record: toRecord(replaced) };
    const current = await this.findLive(_id, now);
    return current && { outcome: "conflict", current };
  }

  /**
   * baseVersion > 0: a compare-and-swap on (version, liveness); of concurrent writers with the
   * same baseVersion the server lets exactly one match. A whole-document replacement rather than
   * $set, so consent-state keys (category names) never meet update-operator field-name rules.
   */
  private async advance(
    next: SubjectRecord,
    baseVersion: number,
    now: Date,
  ): Promise<SubjectWriteResult | null> {
    const { _id, ...replacement } = toDocument(next);
    const written = await this.collection.findOneAndReplace(
      { _id, version: baseVersion, expiresAt: { $gt: now } },
      replacement,
      { returnDocument: "after" },
    );
    if (written) return { outcome: "written", record: toRecord(written) };
    const current = await this.findLive(_id, now);
    if (current === null) return { outcome: "not_found" };
    // The same version here means the record was re-created at baseVersion in between: retry.
    return current.version === baseVersion ? null : { outcome: "conflict", current };
  }

  /**
   * A write that moves the record from formerHash to next.subjectHash, in one transaction
   * (snapshot reads, majority commit): both documents are written (the former one removed), so a
   * rival write or delete of either makes one of the two transactions conflict, and the loser runs
   * again on what the winner left, at most MAX_WRITE_ATTEMPTS times. A run that lost its
   * connection or its reply (the driver's network errors, which it labels transient too) is run
   * again once, as the driver sends a single write once more (retryWrites). Not the driver's
   * withTransaction, which retries for up to 120 s: every other write fails within one command's
   * bound (mongo-timeouts.ts), and this one, when the primary stops answering, after two runs that
   * each wait for one reply (and for their abort's, once past the first command); a commit's
   * outcome is unknown then (503, as README "MongoDB" says of a write that fails for want of its
   * majority). False when the deployment takes no transaction (a standalone server).
   */
  private async move(
    next: SubjectRecord,
    baseVersion: number,
    now: Date,
    formerHash: string,
  ): Promise<SubjectWriteResult | false> {
    const session = this.client.startSession();
    let lostReplies = 0;
    try {
      for (let attempt = 1; ; attempt++) {
        session.startTransaction({
          readConcern: { level: "snapshot" },
          // The collection's: a journaled majority waited for as long as every other write waits
          // (wtimeoutMS, mongo-timeouts.ts), where the driver would give a commit 10 s.
          writeConcern: this.collection.writeConcern,
          readPreference: "primary",
        });
        try {
          const result = await this.moveIn(session, next, baseVersion, now, formerHash);
          await session.commitTransaction();
          return result;
        } catch (error) {
          if (session.inTransaction()) await session.abortTransaction().catch(() => {});
          if (error instanceof MongoServerError && error.code === ILLEGAL_OPERATION) {
            this.transactions = false;
            return false;
          }
          // A duplicate _id on the upsert is a rival's insert of the current hash: run again too.
          const transient =
            (error instanceof MongoError && error.hasErrorLabel("TransientTransactionError")) ||
            isDuplicateKeyOn(error, "_id", "_id_");
          const lost = error instanceof MongoNetworkError && ++lostReplies > 1;
          if (!transient || lost || attempt >= MAX_WRITE_ATTEMPTS) throw error;
          // A rival transaction holds a document until it commits, and a conflict with it fails at
          // once: wait a little before reading again, longer each run and jittered, as the
          // driver's withTransaction does (at least half of 5 ms × 1.5^run).
          const backoffMs = 5 * 1.5 ** attempt;
          await sleep(backoffMs / 2 + (Math.random() * backoffMs) / 2);
        }
      }
    } finally {
      await session.endSession();
    }
  }

  /** One attempt of move()'s transaction: read both documents, compare, write both. */
  private async moveIn(
    session: ClientSession,
    next: SubjectRecord,
    baseVersion: number,
    now: Date,
    formerHash: string,
  ): Promise<SubjectWriteResult> {
    const ids = [next.subjectHash, formerHash];
    const documents = await this.collection.find({ _id: { $in: ids } }, { session }).toArray();
    const liveUnder = (id: string) =>
      documents.find((document) => document._id === id && document.expiresAt > now);
    const live = liveUnder(next.subjectHash) ?? liveUnder(formerHash);
    if (live) {
      if (live.version !== baseVersion) return { outcome: "conflict", current: toRecord(live) };
    } else if (baseVersion > 0) {
      return { outcome: "not_found" };
    }
    const { _id, ...replacement } = toDocument(next);
    await this.collection.replaceOne({ _id }, replacement, { upsert: true, session });
    await this.collection.deleteOne({ _id: formerHash }, { session });
    return { outcome: "written", record: structuredClone(next) };
  }

  /** The live document as the primary has it now: it may be a rival write not yet majority-committed. */
  private async findLive(_id: string, now: Date): Promise<SubjectRecord | null> {
    const document = await this.collection.findOne({ _id, expiresAt: { $gt: now } }, READ_LATEST);
    return document && toRecord(document);
  }
}

function toDocument(record: SubjectRecord): SubjectDocument {
  return {
    _id: record.subjectHash,
    teamId: record.teamId,
    bannerId: record.bannerId,
    consentState: record.consentState,
    protocolVersion: record.protocolVersion,
    version: record.version,
    clientUpdatedAt: record.clientUpdatedAt,
    updatedAt: record.updatedAt,
    expiresAt: record.expiresAt,
  };
}

function toRecord(document: WithId<SubjectDocument>): SubjectRecord {
  return {
    subjectHash: document._id,
    teamId: document.teamId,
    bannerId: document.bannerId,
    consentState: document.consentState,
    protocolVersion: document.protocolVersion,
    version: document.version,
    clientUpdatedAt: document.clientUpdatedAt,
    updatedAt: document.updatedAt,
    expiresAt: document.expiresAt,
  };
}
