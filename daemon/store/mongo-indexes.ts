import { isDeepStrictEqual } from "node:util";
import {
  type CreateIndexesOptions,
  type Db,
  type Document,
  type IndexDescription,
  MongoServerError,
} from "mongodb";
import { StartupError } from "#daemon/config.js";
import { refuseDefaultCollations } from "#daemon/store/mongo-collations.js";
import { serverKind } from "#daemon/store/mongo-topology.js";

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
 * MongoDB's refusals of an index asked for because the collection holds one like it otherwise:
 * IndexOptionsConflict (85: its keys under another name, or its name with other options) and
 * IndexKeySpecsConflict (86: its name with other keys).
 */
const INDEX_CONFLICT_CODES = new Set([85, 86]);

/**
 * Unique indexes carry correctness (duplicate keys) and TTL indexes collect expired records.
 * Only the indexes a collection lacks are created (and those a release retired dropped), so a
 * start that finds them all writes nothing and comes up while a majority is away (a secondary
 * down beside an arbiter), serving what the primary can. A start that does build one (the first,
 * or the first of a release that adds one) waits for it on a connection of its own
 * (`openBuilder`), without the bound every other reply has: a build on a large collection takes
 * as long as it takes, and commits once a majority of the voting members that hold data has it
 * (buildOptions). A start that finds one of them still being built (by a daemon starting beside
 * it) asks for it too, and so waits for that build, which MongoDB lets both calls share: a
 * daemon never comes up before its indexes are ready (a claim hinting one not ready would fail).
 *
 * An index is found by its name, and one found under a name this version uses must be the index
 * this version defines (keys, uniqueness, partial filter, TTL, sparseness, collation, visibility):
 * one that is not (left by another version, or changed by hand) stops the start with
 * IndexConflictError naming it and the fix, as no request could rely on it. It is not rebuilt
 * here: dropping a unique index would leave the daemons already running without it until the
 * build ends, and daemons starting together would race to drop and build. A release that changes
 * an index gives it a new name and retires the old one, so this never meets its own indexes.
 * A build MongoDB refuses for an index in its way (one made by hand with the keys of one of these
 * under another name) stops the start likewise, with IndexBuildConflictError.
 */
export async function ensureIndexes(
  db: Db,
  wanted: readonly CollectionIndexes[],
  openBuilder: () => Promise<IndexBuilder>,
): Promise<void> {
  await refuseDefaultCollations(
    db,
    wanted.map(({ collection }) => collection),
  );
  const plans = await Promise.all(wanted.map((collection) => planIndexes(db, collection)));
  const conflicts = plans.flatMap(({ conflicts }) => conflicts);
  if (conflicts.length > 0) throw new IndexConflictError(conflicts);
  const builds = plans.filter(({ missing }) => missing.length > 0);
  if (builds.length > 0) {
    const builder = await openBuilder();
    try {
      const options = await buildOptions(builder.db);
      await Promise.all(
        builds.map(({ collection, missing }) =>
          builder.db
            .collection(collection)
            .createIndexes(missing, options)
            .catch(async (error: unknown) => {
              if (!isIndexConflict(error)) throw error;
              throw await IndexBuildConflictError.of(db, collection, missing, error);
            }),
        ),
      );
    } finally {
      await builder.close();
    }
  }
  await Promise.all(
    plans.map(async ({ collection, retired }) => {
      for (const name of retired) {
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

/**
 * An index build commits once a majority of the replica set's data-bearing voting members has
 * built it (commitQuorum "majority", MongoDB 4.4 and later), not MongoDB's default of every one of
 * them: a start that builds one while such a member is down (one of three) comes up, where it
 * would wait for that member's return. A build joining one already running (started by another
 * daemon) keeps that build's quorum. A standalone server, which has no members to wait for,
 * refuses any quorum: it is sent none.
 */
async function buildOptions(db: Db): Promise<CreateIndexesOptions> {
  const standalone = serverKind(await db.command({ hello: 1 })) === "standalone";
  return standalone ? {} : { commitQuorum: "majority" };
}

/** What a start does in one collection, from one listing of its indexes, each looked up once. */
interface IndexPlan {
  collection: string;
  /** "collection.index is … but this version needs …", for each one defined otherwise. */
  conflicts: string[];
  /** The indexes this version defines that the collection lacks. */
  missing: IndexDescription[];
  /** The retired indexes the collection still holds. */
  retired: string[];
}

async function planIndexes(
  db: Db,
  { collection, indexes, retired = [] }: CollectionIndexes,
): Promise<IndexPlan> {
  const stored = await storedIndexes(db, collection);
  const conflicts: string[] = [];
  const missing: IndexDescription[] = [];
  for (const index of indexes) {
    const { found, conflict } = storedAs(collection, stored, index);
    if (conflict) conflicts.push(conflict);
    else if (found === undefined || found.building) missing.push(index);
  }
  return { collection, conflicts, missing, retired: retired.filter((name) => stored.has(name)) };
}

/**
 * The index `stored` holds under `index`'s name, and, when it is defined otherwise,
 * "collection.index is … but this version needs …" (indexConflict).
 */
function storedAs(collection: string, stored: Map<string, StoredIndex>, index: IndexDescription) {
  const found = index.name === undefined ? undefined : stored.get(index.name);
  const conflict = found && indexConflict(found.spec, index);
  return { found, conflict: conflict && `${collection}.${index.name} ${conflict}` };
}

/** An index a collection holds: its definition, and whether its build is still running. */
interface StoredIndex {
  spec: Document;
  building: boolean;
}

/**
 * A collection's indexes by name; none for a collection not created yet. listIndexes lists an
 * index from the moment its build starts, as a built one, unless asked with includeBuildUUIDs:
 * an index being built is then listed as `{ spec, buildUUID }`.
 */
async function storedIndexes(db: Db, collection: string): Promise<Map<string, StoredIndex>> {
  const listed = await db
    .runCursorCommand({ listIndexes: collection, includeBuildUUIDs: true })
    .toArray()
    .catch((error: unknown) => {
      if (error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND) return [];
      throw error;
    });
  return new Map(
    listed.map((listing): [string, StoredIndex] => {
      const building = listing.buildUUID !== undefined;
      const spec = (building ? listing.spec : listing) as Document;
      return [spec.name as string, { spec, building }];
    }),
  );
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

function isIndexConflict(error: unknown): error is MongoServerError {
  return (
    error instanceof MongoServerError &&
    typeof error.code === "number" &&
    INDEX_CONFLICT_CODES.has(error.code)
  );
}

/**
 * A build MongoDB refused as conflicting with an index the collection holds (INDEX_CONFLICT_CODES),
 * read again after the refusal: an index made by hand with the keys of one this version needs,
 * under another name (`createIndex({ keyHash: 1 }, { unique: true })` names it keyHash_1), or one
 * stored under a name this version uses since the start listed them. The message names each, and
 * the mongosh command that drops it; the server's own words when the listing shows neither.
 */
export class IndexBuildConflictError extends StartupError {
  static async of(
    db: Db,
    collection: string,
    asked: readonly IndexDescription[],
    refusal: MongoServerError,
  ): Promise<IndexBuildConflictError> {
    const stored = await storedIndexes(db, collection);
    const held = new Map<string, string>();
    for (const index of asked) {
      const { conflict } = storedAs(collection, stored, index);
      if (conflict) held.set(index.name as string, conflict);
      for (const [name, { spec }] of stored) {
        if (name === index.name || !isDeepStrictEqual(keysOf(spec), keysOf(index))) continue;
        held.set(
          name,
          `${collection}.${name} (${describeIndex(spec)}) has the keys of ${collection}.${index.name}, which this version needs as ${describeIndex(index)}`,
        );
      }
    }
    return new IndexBuildConflictError(collection, held, refusal);
  }

  private constructor(collection: string, held: Map<string, string>, refusal: MongoServerError) {
    const drop = (name: string) => `db.getCollection("${collection}").dropIndex("${name}")`;
    super(
      held.size > 0
        ? `MongoDB did not build this version's indexes in ${collection}, as indexes it holds are in their way (made by hand, or left by another version): ${[...held.values()].join("; ")}. Drop each one (in mongosh: ${[...held.keys()].map(drop).join("; ")}) and start again, which builds them as this version needs`
        : `MongoDB did not build this version's indexes in ${collection}, as an index it holds is in their way (${refusal.message}): drop the index the server names (in mongosh: ${drop("<index>")}) and start again, which builds them as this version needs`,
      { cause: refusal },
    );
  }
}

/**
 * How a stored index (a listIndexes document) differs from the one this version defines, said as
 * "is X but this version needs Y", or undefined when it serves as that one does.
 *
 * What the service's definitions use is compared: the keys in their order, with their directions
 * by value (the client reads every number as a JS number, mongoClientOptions, so a double from
 * mongosh is the integer it equals), unique, sparse and hidden (absent is false), the TTL, the
 * partial filter in any field order, and whether there is a collation (the simple one is none:
 * the service defines none). What a server adds to a listing (`v`, `ns` before 4.4, `background`,
 * `prepareUnique` and the like) is not.
 */
export function indexConflict(stored: Document, wanted: IndexDescription): string | undefined {
  if (isDeepStrictEqual(indexCanon(stored), indexCanon(wanted))) return undefined;
  return `is ${describeIndex(stored)} but this version needs ${describeIndex(wanted)}`;
}

/** An index's keys; entries keep the order that makes { a: 1, b: 1 } and { b: 1, a: 1 } differ. */
function keysOf(index: Document): [string, unknown][] {
  return Object.entries((index.key as Document | undefined) ?? {});
}

/** An index definition reduced to what is compared (indexConflict). */
function indexCanon(index: Document) {
  const collation = index.collation as Document | undefined;
  return {
    key: keysOf(index),
    unique: Boolean(index.unique),
    sparse: Boolean(index.sparse),
    hidden: Boolean(index.hidden),
    expireAfterSeconds: index.expireAfterSeconds ?? null,
    partialFilterExpression:
      index.partialFilterExpression === undefined
        ? null
        : filterCanon(index.partialFilterExpression as Document),
    collation: collation !== undefined && collation.locale !== "simple",
  };
}

/**
 * A partial filter with its fields, and each field's operators, in one order (all must hold), and
 * `{ f: v }` as `{ f: { $eq: v } }`.
 */
function filterCanon(filter: Document): [string, [string, unknown][]][] {
  return Object.entries(filter)
    .map(([field, condition]): [string, [string, unknown][]] => [
      field,
      isOperatorDocument(condition)
        ? Object.entries(condition).sort(([a], [b]) => (a < b ? -1 : 1))
        : [["$eq", condition]],
    ])
    .sort(([a], [b]) => (a < b ? -1 : 1));
}

function isOperatorDocument(value: unknown): value is Document {
  if (value === null || typeof value !== "object" || value instanceof Date) return false;
  const fields = Object.keys(value);
  return fields.length > 0 && fields.every((field) => field.startsWith("$"));
}

/** An index as an operator reads it: its keys, then each option that matters. */
function describeIndex(index: Document): string {
  const canon = indexCanon(index);
  const parts = [JSON.stringify(index.key ?? {})];
  if (canon.unique) parts.push("unique");
  if (canon.sparse) parts.push("sparse");
  if (index.partialFilterExpression !== undefined) {
    parts.push(`partial ${JSON.stringify(index.partialFilterExpression)}`);
  }
  if (canon.expireAfterSeconds !== null) {
    parts.push(`expireAfterSeconds ${canon.expireAfterSeconds}`);
  }
  if (canon.collation) parts.push(`collation ${JSON.stringify(index.collation)}`);
  if (canon.hidden) parts.push("hidden");
  return parts.join(", ");
}
