import { randomInt } from "node:crypto";
import {
  type Collection,
  type Document,
  type Filter,
  type FindOptions,
  MongoBulkWriteError,
  MongoServerError,
  type OptionalUnlessRequiredId,
  type UpdateFilter,
  type WithId,
} from "mongodb";
import { DuplicateKeyError, InsertContendedError } from "#daemon/store/store.js";

/**
 * Read options for a read that follows a failed conditional write: it must see the document the
 * write just lost to, which the primary has applied but may not have majority-committed yet, so
 * read concern "local" here instead of the client's "majority".
 */
export const READ_LATEST = { readConcern: { level: "local" } } satisfies FindOptions;

/** The server's duplicate-key code (E11000), raised by every unique index, `_id` included. */
const DUPLICATE_KEY_CODE = 11000;

/**
 * True when `error` is a unique-index violation. Adapters that resolve races themselves (subject
 * creation, counter upserts) need the test without the translation.
 */
export function isDuplicateKey(error: unknown): error is MongoServerError {
  return error instanceof MongoServerError && error.code === DUPLICATE_KEY_CODE;
}

/**
 * True when `error` is a violation of the unique index on `field` (`_id`, `slot`…): the server
 * names the index's fields in keyPattern; older servers name the index (`indexName`) in the
 * message only. A duplicate on any other unique index is not the race its caller resolves.
 */
export function isDuplicateKeyOn(
  error: unknown,
  field: string,
  indexName: string,
): error is MongoServerError {
  if (!isDuplicateKey(error)) return false;
  const keyPattern = (error.keyPattern as Document | undefined) ?? (error.keyValue as Document);
  if (keyPattern) return Object.hasOwn(keyPattern, field);
  return error.message.includes(`index: ${indexName} `);
}

/**
 * True when an unordered bulk write failed only on unique indexes (every failed operation a
 * duplicate key) and met its write concern: its other operations were applied, as `error.result`
 * says. The driver's error carries the first failure's code only, so isDuplicateKey alone would
 * let another operation's different failure pass as a duplicate.
 */
export function isOnlyDuplicateKeys(error: unknown): error is MongoBulkWriteError {
  if (!(error instanceof MongoBulkWriteError)) return false;
  const failures = error.result.getWriteErrors();
  return (
    failures.length > 0 &&
    failures.every((failure) => failure.code === DUPLICATE_KEY_CODE) &&
    error.result.getWriteConcernError() === undefined
  );
}

/**
 * The port's DuplicateKeyError for a driver duplicate-key error, so services never see driver
 * types; the violated field comes from the server's keyPattern and the driver error stays as cause.
 */
export function duplicateKeyError(error: MongoServerError, what: string): DuplicateKeyError {
  const field = Object.keys((error.keyPattern as Document | undefined) ?? {})[0] ?? "key";
  return new DuplicateKeyError(`${what} ${field === "_id" ? "id" : field}`, { cause: error });
}

/** insertOne with unique-index violations reported as DuplicateKeyError (the insert() ports). */
export async function insertUnique<T extends Document>(
  collection: Collection<T>,
  document: OptionalUnlessRequiredId<T>,
  what: string,
): Promise<void> {
  try {
    await collection.insertOne(document);
  } catch (error) {
    if (isDuplicateKey(error)) throw duplicateKeyError(error, what);
    throw error;
  }
}

/**
 * Slots an insert may lose to racers beyond the maximum before it gives up. Each loss is another
 * insert's success, so only removals racing with inserts can make it lose more than the maximum.
 */
const EXTRA_SLOT_ATTEMPTS = 10;

/**
 * A record of a collection held to a maximum per team. `slot` (0 to the team's maximum less one,
 * unique per team through a unique partial `(teamId, slot)` index) is the place an insert under a
 * maximum took; one stored without a maximum (or before there was one) has none. A write after
 * the insert must keep it (an update, or a replacement that carries it), or a racing insert could
 * take the slot again while its record still counts, and pass the maximum.
 */
interface SlottedDocument extends Document {
  _id: string;
  teamId: string;
  slot?: number;
}

/**
 * The insert() of a port that may hold a team to `maxPerTeam` records (webhook endpoints,
 * banners): true once stored, false (nothing stored) when the team already has that many.
 * Without a maximum it is insertUnique. Under one, the insert takes one of the team's lowest free
 * slots, as many as the team has room for: the unique index named `slotIndex` makes the count and
 * the insert one atomic step, as LMDB's write transaction does. A racer that took the same slot
 * first sends the insert back for another free slot, or a refusal when none is left; after
 * maxPerTeam + EXTRA_SLOT_ATTEMPTS lost slots it gives up with InsertContendedError. Another
 * duplicate key (the id, a public id) is the port's DuplicateKeyError, `what` naming the record.
 */
export async function insertUnderTeamMaximum<T extends SlottedDocument>(
  collection: Collection<T>,
  document: T,
  maxPerTeam: number | undefined,
  names: { what: string; slotIndex: string },
): Promise<boolean> {
  if (maxPerTeam === undefined) {
    await insertUnique(collection, document as OptionalUnlessRequiredId<T>, names.what);
    return true;
  }
  for (let attempt = 1; ; attempt++) {
    const slot = await freeSlot(collection, document.teamId, maxPerTeam);
    if (slot === undefined) return false;
    try {
      await collection.insertOne({ ...document, slot } as OptionalUnlessRequiredId<T>);
      return true;
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      if (!isDuplicateKeyOn(error, "slot", names.slotIndex)) {
        throw duplicateKeyError(error, names.what);
      }
      if (attempt >= maxPerTeam + EXTRA_SLOT_ATTEMPTS) {
        throw new InsertContendedError(names.what, { cause: error });
      }
    }
  }
}

/**
 * A slot no record of the team holds, among the lowest `maxPerTeam - stored` free ones;
 * undefined when the team has `maxPerTeam` records or more. Every later read, its count grown by
 * the inserts since, offers a subset of those slots (fewer of them, from a set that only lost
 * slots), so racers that read `stored` records can add at most `maxPerTeam - stored` between
 * them, whatever slots the team's records hold: ones taken under a higher maximum, or none (a
 * record stored without a maximum). Chosen at random among them, so that racing inserts seldom
 * pick the same one.
 */
async function freeSlot<T extends SlottedDocument>(
  collection: Collection<T>,
  teamId: string,
  maxPerTeam: number,
): Promise<number | undefined> {
  const stored = await collection
    .find<{ slot?: unknown }>({ teamId } as Filter<T>, {
      ...READ_LATEST,
      projection: { _id: 0, slot: 1 },
    })
    .toArray();
  const room = maxPerTeam - stored.length;
  if (room <= 0) return undefined;
  const taken = new Set<number>();
  for (const { slot } of stored) if (typeof slot === "number") taken.add(slot);
  const free: number[] = [];
  for (let slot = 0; free.length < room; slot++) if (!taken.has(slot)) free.push(slot);
  return free[randomInt(free.length)];
}

interface RevocableDocument {
  _id: string;
  revokedAt: Date | null;
}

/**
 * Sets revokedAt to `at` only while it is null (and the document matches `revocable`), then
 * returns the document as stored: the first revocation time stays (key and session ports). A
 * concurrent revocation between the two steps wins and is what the caller sees. Null when there
 * is no such document.
 */
export async function revokeOnce<T extends RevocableDocument>(
  collection: Collection<T>,
  id: string,
  at: Date,
  revocable: Filter<T> = {},
): Promise<WithId<T> | null> {
  const notYetRevoked = { ...revocable, _id: id, revokedAt: null } as Filter<T>;
  const revoke = { $set: { revokedAt: at } } as UpdateFilter<T>;
  const revoked = await collection.findOneAndUpdate(notYetRevoked, revoke, {
    returnDocument: "after",
  });
  return revoked ?? collection.findOne({ _id: id } as Filter<T>, READ_LATEST);
}

/**
 * A versioned replace that matched nothing: false for a stale version or a missing document (the
 * port's refusal), and a RangeError when the stored version was the expected one, so only the
 * identity fields in the filter differed, which a replace must never move (`moved` says which).
 * The embedded stores check the same inside their transactions.
 */
export async function refusedReplace<T extends Document & { version: number }>(
  collection: Collection<T>,
  id: T["_id"],
  expectedVersion: number,
  moved: string,
): Promise<false> {
  // READ_LATEST: a majority read could show the version a concurrent replace just moved past,
  // and turn its ordinary refusal into a RangeError.
  const stored = await collection.findOne({ _id: id } as Filter<T>, {
    ...READ_LATEST,
    projection: { version: 1 },
  });
  if (stored?.version === expectedVersion) throw new RangeError(`replace cannot change ${moved}`);
  return false;
}
