import type { Collection, IndexDescription, WithId } from "mongodb";
import {
  type SessionRecord,
  type SessionStore,
  unexpiredAt,
} from "#daemon/sessions/session-store.js";
import { insertUnique, revokeOnce } from "#daemon/store/mongo-writes.js";

/** A dashboard session as stored in MongoDB: `_id` is the session's UUID; only the token's hash. */
export type SessionDocument = Omit<SessionRecord, "id"> & { _id: string };

/**
 * SessionStore over the `sessions` collection. A session past its expiry is absent to every
 * call (the port), which each checks on the document it read: the TTL index only collects
 * garbage, about a minute after the expiry, and purgeExpired exactly.
 */
export class MongoSessionStore implements SessionStore {
  static readonly indexes: IndexDescription[] = [
    { key: { tokenHash: 1 }, name: "sessions_token_hash", unique: true },
    { key: { teamId: 1, createdAt: -1, _id: 1 }, name: "sessions_team" },
    // TTL: the server removes a session about a minute after expiresAt; purgeExpired is exact.
    { key: { expiresAt: 1 }, name: "sessions_expiry", expireAfterSeconds: 0 },
  ];

  constructor(private readonly collection: Collection<SessionDocument>) {}

  async insert(session: SessionRecord): Promise<void> {
    await insertUnique(this.collection, toDocument(session), "session");
  }

  async findByHash(tokenHash: string, now: Date): Promise<SessionRecord | null> {
    const document = await this.collection.findOne({ tokenHash });
    return unexpiredAt(document && toSession(document), now);
  }

  async get(id: string, now: Date): Promise<SessionRecord | null> {
    const document = await this.collection.findOne({ _id: id });
    return unexpiredAt(document && toSession(document), now);
  }

  async revoke(id: string, at: Date): Promise<SessionRecord | null> {
    // An expired session is absent (the port): left as it is, and answered null.
    const document = await revokeOnce(this.collection, id, at, { expiresAt: { $gt: at } });
    return unexpiredAt(document && toSession(document), at);
  }

  async listByTeam(teamId: string, now: Date): Promise<SessionRecord[]> {
    const documents = await this.collection
      .find({ teamId, expiresAt: { $gt: now } })
      .sort({ createdAt: -1, _id: 1 })
      .toArray();
    return documents.map(toSession);
  }

  async purgeExpired(now: Date): Promise<number> {
    const { deletedCount } = await this.collection.deleteMany({ expiresAt: { $lte: now } });
    return deletedCount;
  }
}

function toDocument(session: SessionRecord): SessionDocument {
  return {
    _id: session.id,
    teamId: session.teamId,
    tokenHash: session.tokenHash,
    createdAt: session.createdAt,
    expiresAt: session.expiresAt,
    revokedAt: session.revokedAt,
  };
}

function toSession(document: WithId<SessionDocument>): SessionRecord {
  return {
    id: document._id,
    teamId: document.teamId,
    tokenHash: document.tokenHash,
    createdAt: document.createdAt,
    expiresAt: document.expiresAt,
    revokedAt: document.revokedAt ?? null,
  };
}
