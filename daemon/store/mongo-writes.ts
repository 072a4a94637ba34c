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
import { DuplicateKeyError } from "#daemon/store/store.js";

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

interface RevocableDocument {
  _id: string;
  revokedAt: Date | null;
}

/**
 * Sets revokedAt to `at` only while it is null, then returns the document as stored: the first
 * revocation time stays (key and session ports). A concurrent revocation between the two steps
 * wins and is what the caller sees. Null when there is no such document.
 */
export async function revokeOnce<T extends RevocableDocument>(
  collection: Collection<T>,
  id: string,
  at: Date,
): Promise<WithId<T> | null> {
  const notYetRevoked = { _id: id, revokedAt: null } as Filter<T>;
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
