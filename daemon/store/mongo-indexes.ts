import { isDeepStrictEqual } from "node:util";
import { BSON, type Db, type Document, type IndexDescription, MongoServerError } from "mongodb";
import { StartupError } from "#daemon/config.js";

/** The indexes an adapter relies on in one collection, and those a release retired there. */
export interface CollectionIndexes {
  collection: string;
  indexes: readonly IndexDescription[];
  retired?: readonly string[];
}

/** A database handle for index builds, and how to let it go once they are done. */
export interface IndexBuilder {
  db: Db;
  close(): Promise<void>;
}

/** MongoDB's NamespaceNotFound: a collection not created yet has no indexes to list. */
const NAMESPACE_NOT_FOUND = 26;
/** MongoDB's IndexNotFound: another daemon starting at the same time dropped it first. */
const INDEX_NOT_FOUND = 27;

/**
 * Unique indexes carry correctness (duplicate keys) and TTL indexes collect expired records.
 * Only the indexes a collection lacks are created (and those a release retired dropped), so a
 * start that finds them all writes nothing and comes up while a majority is away (a secondary
 * down beside an arbiter), serving what the primary can. A start that does build one (the first,
 * or the first of a release that adds one) waits for it on a connection of its own
 * (`openBuilder`), without the bound every other reply has: a build on a large collection takes
 * as long as it takes, and commits once every voting member that holds data has it (MongoDB's
 * commitQuorum).
 *
 * An index is found by its name, and one found under a name this version uses must be the index
 * this version defines (keys, uniqueness, partial filter, TTL, sparseness, collation, visibility):
 * one that is not (left by another version, or changed by hand) stops the start with
 * IndexConflictError naming it and the fix, as no request could rely on it. It is not rebuilt
 * here: dropping a unique index would leave the daemons already running without it until the
 * build ends, and daemons starting together would race to drop and build. A release that changes
 * an index gives it a new name and retires the old one, so this never meets its own indexes.
 */
export async function ensureIndexes(
  db: Db,
  wanted: readonly CollectionIndexes[],
  openBuilder: () => Promise<IndexBuilder>,
): Promise<void> {
  const existing = await Promise.all(wanted.map(({ collection }) => listIndexes(db, collection)));
  const conflicts = wanted.flatMap(({ collection, indexes }, i) =>
    indexes.flatMap((index) => {
      const found = existing[i]?.find((stored) => stored.name === index.name);
      const conflict = found && indexConflict(found, index);
      return conflict ? [`${collection}.${index.name} ${conflict}`] : [];
    }),
  );
  if (conflicts.length > 0) throw new IndexConflictError(conflicts);
  const missing = wanted
    .map(({ collection, indexes }, i) => ({
      collection,
      indexes: indexes.filter(
        (index) => !existing[i]?.some((stored) => stored.name === index.name),
      ),
    }))
    .filter(({ indexes }) => indexes.length > 0);
  if (missing.length > 0) {
    const builder = await openBuilder();
    try {
      await Promise.all(
        missing.map(({ collection, indexes }) =>
          builder.db.collection(collection).createIndexes([...indexes]),
        ),
      );
    } finally {
      await builder.close();
    }
  }
  await Promise.all(
    wanted.map(async ({ collection, retired = [] }, i) => {
      for (const name of retired) {
        if (!existing[i]?.some((stored) => stored.name === name)) continue;
        await db
          .collection(collection)
          .dropIndex(name)
          .catch((error: unknown) => {
            // Daemons started together (a rolling upgrade) all list the retired index; one drops it.
            if (error instanceof MongoServerError && error.code === INDEX_NOT_FOUND) return;
            throw error;
          });
      }
    }),
  );
}

async function listIndexes(db: Db, collection: string): Promise<Document[]> {
  return db
    .collection(collection)
    .listIndexes()
    .toArray()
    .catch((error: unknown) => {
      if (error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND) return [];
      throw error;
    });
}

/**
 * Indexes stored under a name this version uses, defined otherwise: the daemon does not start on
 * them. The message names each (collection.index), what it is, what it must be, and the fix.
 */
export class IndexConflictError extends StartupError {
  constructor(readonly conflicts: readonly string[]) {
    super(
      `MongoDB holds indexes under names this version uses, defined otherwise (left by another version, or changed by hand): ${conflicts.join("; ")}. Drop each one (in mongosh: db.getCollection("<collection>").dropIndex("<index>")) and start again, which builds it as this version needs`,
    );
  }
}

/**
 * How a stored index (a listIndexes document) differs from the one this version defines, said as
 * "is X but this version needs Y", or undefined when it serves as that one does.
 *
 * Only what decides which documents an index holds and how it is used is compared: its keys and
 * their order, unique, sparse, hidden, the partial filter, the TTL and the collation. What a
 * server adds to a listing (`v`, `ns` before 4.4, `background`, `textIndexVersion`,
 * `2dsphereIndexVersion`, `prepareUnique` and the like) is not. Every way a listing may spell the
 * same definition is taken for it (indexCanon): a number of any BSON type (1, 1.0, Int32, Long,
 * Double, Decimal128 or a bigint, as the driver's deserialisation options give them), a flag
 * absent or false (or 0, as older servers kept it), a partial filter in any field order or with
 * `{ f: v }` for `{ f: { $eq: v } }`, a collation with the fields the server filled in.
 */
export function indexConflict(stored: Document, wanted: IndexDescription): string | undefined {
  const [is, needs] = [indexCanon(stored), indexCanon(wanted)];
  if (
    isDeepStrictEqual({ ...is, collation: null }, { ...needs, collation: null }) &&
    sameCollation(is.collation, needs.collation)
  ) {
    return undefined;
  }
  return `is ${describeIndex(stored)} but this version needs ${describeIndex(wanted)}`;
}

/** An index definition reduced to what is compared, each part in one spelling. */
function indexCanon(index: Document) {
  return {
    // Entries keep the order that makes { a: 1, b: 1 } and { b: 1, a: 1 } different indexes;
    // a direction is a number the server compares by value (a hint by key pattern as well).
    key: Object.entries((index.key as Document | undefined) ?? {}).map(
      ([field, kind]) => [field, plainNumber(kind) ?? kind] as const,
    ),
    unique: flag(index.unique),
    sparse: flag(index.sparse),
    hidden: flag(index.hidden),
    partialFilterExpression:
      index.partialFilterExpression === undefined
        ? null
        : filterCanon(index.partialFilterExpression as Document),
    expireAfterSeconds:
      index.expireAfterSeconds === undefined ? null : valueCanon(index.expireAfterSeconds),
    collation: collationCanon(index.collation as Document | undefined),
  };
}

/** A number of any BSON representation as a JS number (-0 as 0), or undefined for another value. */
function plainNumber(value: unknown): number | undefined {
  let number: number | undefined;
  if (typeof value === "number") number = value;
  else if (typeof value === "bigint") number = Number(value);
  else if (value !== null && typeof value === "object" && "_bsontype" in value) {
    switch (value._bsontype) {
      case "Int32":
      case "Double":
        number = Number(value.valueOf());
        break;
      case "Long":
        number = (value as unknown as { toNumber(): number }).toNumber();
        break;
      case "Decimal128":
        number = Number(String(value));
        break;
    }
  }
  return number === 0 ? 0 : number;
}

/**
 * unique, sparse, hidden, and `$exists` in a partial filter, as the server reads them: absent,
 * null, false and a zero of any number type are off, any other value on (older servers kept a
 * number as given).
 */
function flag(value: unknown): boolean {
  if (value === undefined || value === null || value === false) return false;
  const number = plainNumber(value);
  return number === undefined || number !== 0;
}

/**
 * A partial filter in one spelling: field order does not matter at the level of fields and of
 * operators (all must hold), `{ f: v }` is `{ f: { $eq: v } }`, `$exists` holds a boolean. The
 * operands are values (valueCanon), whose documents keep their order: an embedded document
 * matches only in its own field order.
 */
function filterCanon(filter: Document): Document {
  const canon: Document = {};
  for (const [field, condition] of Object.entries(filter)) {
    if (field.startsWith("$")) {
      // $and (and $or where a server allows it): a list of filters.
      canon[field] = Array.isArray(condition)
        ? condition.map((part) => filterCanon(part as Document))
        : valueCanon(condition);
    } else if (isOperatorDocument(condition)) {
      canon[field] = Object.fromEntries(
        Object.entries(condition).map(([operator, operand]) => [
          operator,
          operator === "$exists" ? flag(operand) : valueCanon(operand),
        ]),
      );
    } else {
      canon[field] = { $eq: valueCanon(condition) };
    }
  }
  return canon;
}

function isOperatorDocument(value: unknown): value is Document {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  if ("_bsontype" in value || value instanceof Date || value instanceof RegExp) return false;
  const fields = Object.keys(value);
  return fields.length > 0 && fields.every((field) => field.startsWith("$"));
}

function bsonType(value: unknown): string | undefined {
  return value !== null && typeof value === "object" && "_bsontype" in value
    ? String(value._bsontype)
    : undefined;
}

/**
 * A value in one spelling that keeps what tells values apart: numbers as numbers, a document as
 * its entries in order, other BSON values (an ObjectId, a Timestamp) as their extended JSON.
 */
function valueCanon(value: unknown): unknown {
  const number = plainNumber(value);
  if (number !== undefined) return number;
  if (Array.isArray(value)) return value.map(valueCanon);
  if (value instanceof Date) return { $date: value.getTime() };
  if (value instanceof RegExp) return regularExpression(value.source, value.flags);
  if (value === null || typeof value !== "object") return value;
  const type = bsonType(value);
  if (type === "BSONRegExp") {
    const { pattern, options } = value as unknown as { pattern: string; options: string };
    return regularExpression(pattern, options);
  }
  if (type !== undefined) return { [`$${type}`]: BSON.EJSON.stringify(value, { relaxed: false }) };
  return { $document: Object.entries(value).map(([field, inner]) => [field, valueCanon(inner)]) };
}

/** A JavaScript RegExp and a BSONRegExp (the driver's bsonRegExp option) alike, flags sorted. */
function regularExpression(pattern: string, flags: string) {
  return { $regularExpression: [pattern, [...flags].sort().join("")] };
}

/**
 * A collation's fields but the ICU version, or null for none: the server lists an index's
 * collation with every field filled in (its locale's defaults), and none for the simple one.
 */
function collationCanon(collation: Document | undefined): Document | null {
  if (!collation || collation.locale === "simple") return null;
  const { version: _version, ...fields } = collation;
  return Object.fromEntries(
    Object.entries(fields).map(([field, value]) => [field, valueCanon(value)]),
  );
}

/**
 * Whether a stored collation is the one this version defines: each field it defines holds its
 * value; those it leaves out hold what the server filled in, its locale's defaults.
 */
function sameCollation(stored: Document | null, wanted: Document | null): boolean {
  if (stored === null || wanted === null) return stored === wanted;
  return Object.entries(wanted).every(([field, value]) => isDeepStrictEqual(stored[field], value));
}

/** An index as an operator reads it: its keys, then each option that matters, numbers as such. */
function describeIndex(index: Document): string {
  const canon = indexCanon(index);
  const parts = [JSON.stringify(Object.fromEntries(canon.key))];
  if (canon.unique) parts.push("unique");
  if (canon.sparse) parts.push("sparse");
  if (index.partialFilterExpression !== undefined) {
    parts.push(`partial ${shown(index.partialFilterExpression)}`);
  }
  if (canon.expireAfterSeconds !== null) {
    parts.push(`expireAfterSeconds ${shown(index.expireAfterSeconds)}`);
  }
  if (canon.collation) parts.push(`collation ${shown(index.collation)}`);
  if (canon.hidden) parts.push("hidden");
  return parts.join(", ");
}

/** Relaxed extended JSON: numbers of every BSON type as numbers, other BSON values tagged. */
function shown(value: unknown): string {
  return BSON.EJSON.stringify(value, { relaxed: true });
}
