import type { Collection, IndexDescription } from "mongodb";
import type { CounterStore } from "#daemon/limits/counter-store.js";
import { isDuplicateKey } from "#daemon/store/mongo-writes.js";

/** A rate-limit counter as stored in MongoDB: `_id` is the counter name (never a raw IP). */
export interface CounterDocument {
  _id: string;
  count: number;
  expiresAt: Date;
}

/**
 * CounterStore over the `counters` collection, shared by every daemon on the database so limits
 * hold across processes (decisions §2). Each increment is one atomic upsert.
 */
export class MongoCounterStore implements CounterStore {
  static readonly indexes: IndexDescription[] = [
    { key: { expiresAt: 1 }, name: "counters_expiry", expireAfterSeconds: 0 },
  ];

  constructor(private readonly collection: Collection<CounterDocument>) {}

  /**
   * A counter past its expiry at `now` that the TTL monitor has not removed yet restarts at 1, in
   * the same atomic update.
   */
  async increment(name: string, expiresAt: Date, now: Date): Promise<number> {
    const update = [{ $set: nextCounter(now, expiresAt) }];
    try {
      return await this.upsert(name, update);
    } catch (error) {
      // Two first increments can both try to insert; the loser finds the winner's document now.
      if (!isDuplicateKey(error)) throw error;
      return await this.upsert(name, update);
    }
  }

  async get(name: string, now: Date): Promise<number> {
    const document = await this.collection.findOne({ _id: name, expiresAt: { $gt: now } });
    return document?.count ?? 0;
  }

  async purgeExpired(now: Date): Promise<number> {
    const { deletedCount } = await this.collection.deleteMany({ expiresAt: { $lte: now } });
    return deletedCount;
  }

  private async upsert(name: string, update: object[]): Promise<number> {
    const document = await this.collection.findOneAndUpdate({ _id: name }, update, {
      upsert: true,
      returnDocument: "after",
    });
    if (document === null) throw new Error(`counter ${name} upsert returned no document`);
    return document.count;
  }
}

/**
 * The update-pipeline stage of an increment. Every expression reads the document as it was before
 * the stage, so both fields see the old expiresAt. A fresh upsert has no expiresAt: the explicit
 * $type test makes it start at 1 with the given expiry without relying on how a missing field
 * compares. A live counter keeps the expiry it started with, as the LMDB adapter does.
 */
function nextCounter(now: Date, expiresAt: Date) {
  const expired = {
    $or: [{ $ne: [{ $type: "$expiresAt" }, "date"] }, { $lte: ["$expiresAt", now] }],
  };
  return {
    count: { $cond: [expired, 1, { $add: [{ $ifNull: ["$count", 0] }, 1] }] },
    expiresAt: { $cond: [expired, expiresAt, "$expiresAt"] },
  };
}
