import type { Collection, IndexDescription, WithId } from "mongodb";
import type { ApiKeyRecord, KeyReplacement, KeyStore } from "#daemon/keys/key-store.js";
import { cancellableRead } from "#daemon/store/mongo-cancellation.js";
import { insertUnique, revokeOnce } from "#daemon/store/mongo-writes.js";
import type { ReadCancellation } from "#daemon/store/store.js";

/** An API key as stored in MongoDB: `_id` is the key's UUID; only the key's SHA-256 is kept. */
export type ApiKeyDocument = Omit<ApiKeyRecord, "id"> & { _id: string };

/** KeyStore over the `api_keys` collection. */
export class MongoKeyStore implements KeyStore {
  static readonly indexes: IndexDescription[] = [
    // Every authenticated request looks its key up by hash; two keys may never share one.
    { key: { keyHash: 1 }, name: "api_keys_key_hash", unique: true },
    { key: { teamId: 1, createdAt: -1, _id: -1 }, name: "api_keys_by_team" },
  ];

  constructor(private readonly collection: Collection<ApiKeyDocument>) {}

  async insert(key: ApiKeyRecord): Promise<void> {
    await insertUnique(this.collection, toDocument(key), "api key");
  }

  async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const document = await this.collection.findOne({ keyHash });
    return document && toKey(document);
  }

  async get(id: string): Promise<ApiKeyRecord | null> {
    const document = await this.collection.findOne({ _id: id });
    return document && toKey(document);
  }

  async listByTeam(teamId: string, cancel?: ReadCancellation): Promise<ApiKeyRecord[]> {
    const documents = await cancellableRead(cancel, (options) =>
      this.collection.find({ teamId }, options).sort({ createdAt: -1, _id: -1 }).toArray(),
    );
    return documents.map(toKey);
  }

  async holdsAny(): Promise<boolean> {
    return (await this.collection.findOne({}, { projection: { _id: 1 } })) !== null;
  }

  async revoke(id: string, at: Date): Promise<ApiKeyRecord | null> {
    const document = await revokeOnce(this.collection, id, at);
    return document && toKey(document);
  }

  async retire(id: string, replacement: KeyReplacement): Promise<ApiKeyRecord | null> {
    const { replacedBy, at, graceEnd } = replacement;
    // One atomic pipeline update, only on a key neither revoked (null also matches an absent
    // field) nor replaced (the field is written only by this): the earlier of the stored expiry
    // and `graceEnd`; no expiry (null) → `graceEnd`. The $type test is explicit because the
    // operator $min would keep null (null < date).
    const earlierExpiry = {
      $cond: [
        { $eq: [{ $type: "$expiresAt" }, "date"] },
        { $min: ["$expiresAt", graceEnd] },
        graceEnd,
      ],
    };
    const document = await this.collection.findOneAndUpdate(
      { _id: id, revokedAt: null, replacedBy: { $exists: false } },
      // $literal: in a pipeline a string starting with $ would be read as a field path.
      [
        {
          $set: {
            expiresAt: earlierExpiry,
            replacedBy: { $literal: replacedBy },
            replacedAt: at,
          },
        },
      ],
      { returnDocument: "after" },
    );
    return document && toKey(document);
  }
}

function toDocument(key: ApiKeyRecord): ApiKeyDocument {
  return {
    _id: key.id,
    teamId: key.teamId,
    environment: key.environment,
    name: key.name,
    scopes: [...key.scopes],
    keyHash: key.keyHash,
    hint: key.hint,
    createdAt: key.createdAt,
    expiresAt: key.expiresAt,
    revokedAt: key.revokedAt,
    ...(key.replacedBy !== undefined && { replacedBy: key.replacedBy }),
    ...(key.replacedAt !== undefined && { replacedAt: key.replacedAt }),
  };
}

function toKey(document: WithId<ApiKeyDocument>): ApiKeyRecord {
  return {
    id: document._id,
    teamId: document.teamId,
    environment: document.environment,
    name: document.name,
    scopes: [...document.scopes],
    keyHash: document.keyHash,
    hint: document.hint,
    createdAt: document.createdAt,
    expiresAt: document.expiresAt ?? null,
    revokedAt: document.revokedAt ?? null,
    ...(typeof document.replacedBy === "string" && { replacedBy: document.replacedBy }),
    ...(document.replacedAt instanceof Date && { replacedAt: document.replacedAt }),
  };
}
