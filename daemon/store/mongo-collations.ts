import type { Db, Document } from "mongodb";
import { StartupError } from "#daemon/config.js";

/**
 * The service's collections that exist with a default collation stop the start
 * (CollationError), before their indexes are read: an index built in one takes its collation, so
 * string ranges (a key prefix's bounds on `_id`) would compare by the collation, and dropping a
 * conflicting index would only rebuild it with the same collation. Such a collection is one made
 * beforehand: by hand, or by mongorestore from a dump with its options. One collection listing,
 * by name; a collection not created yet is created without one by the service's first write.
 */
export async function refuseDefaultCollations(
  db: Db,
  collections: readonly string[],
): Promise<void> {
  const listed = await db
    .listCollections({ name: { $in: [...collections] } }, { nameOnly: false })
    .toArray();
  const collated = listed.flatMap((listing) => {
    const collation = (listing as Document).options?.collation as Document | undefined;
    // The simple collation is a binary comparison, as with none.
    return collation && collation.locale !== "simple" ? [{ name: listing.name, collation }] : [];
  });
  if (collated.length > 0) throw new CollationError(collated);
}

/**
 * Collections of the service created with a default collation: the daemon does not start on
 * them. The message names each, its collation, and the fix.
 */
export class CollationError extends StartupError {
  constructor(readonly collections: readonly { name: string; collation: Document }[]) {
    const named = collections.map(
      ({ name, collation }) => `${name} (collation ${JSON.stringify(collation)})`,
    );
    super(
      `MongoDB holds collections of this service created with a default collation, which its indexes would take, so its reads by key range would compare otherwise than it needs: ${named.join("; ")}. Recreate each without a collation (copy its documents to a collection created without options, drop it and rename the copy; or restore the dump with mongorestore --noOptionsRestore) and start again`,
    );
  }
}
