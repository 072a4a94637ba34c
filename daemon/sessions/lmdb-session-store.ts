import type { Database } from "lmdb";
import {
  type SessionRecord,
  type SessionStore,
  unexpiredAt,
} from "#daemon/sessions/session-store.js";
import { type ExpiryIndex, expiryKey, purgeExpiredIn } from "#daemon/store/lmdb-keys.js";
import { DuplicateKeyError } from "#daemon/store/store.js";

/** The named databases of the session store: records by id and the indexes that point at them. */
export interface LmdbSessionDatabases {
  sessions: Database<SessionRecord, string>;
  /** tokenHash → id; also enforces that tokenHash is unique. */
  sessionIdsByHash: Database<string, string>;
  /** [expiresAtMs, id] → id; a session's expiry never changes, so its entry never moves. */
  sessionIdsByExpiry: ExpiryIndex;
}

/** Port order of listByTeam: newest first, ties by id. */
function newestFirst(a: SessionRecord, b: SessionRecord): number {
  return b.createdAt.getTime() - a.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** SessionStore over LMDB; a session and its index entries are written in one transaction. */
export function createLmdbSessionStore(dbs: LmdbSessionDatabases): SessionStore {
  const { sessions, sessionIdsByHash, sessionIdsByExpiry } = dbs;
  return {
    async insert(session) {
      await sessions.transaction(() => {
        // Checked before any write: lmdb does not roll back a callback that throws.
        if (sessions.doesExist(session.id)) throw new DuplicateKeyError("session id");
        if (sessionIdsByHash.doesExist(session.tokenHash)) {
          throw new DuplicateKeyError("tokenHash");
        }
        sessions.putSync(session.id, session);
        sessionIdsByHash.putSync(session.tokenHash, session.id);
        sessionIdsByExpiry.putSync(expiryKey(session.id, session.expiresAt), session.id);
      });
    },
    async findByHash(tokenHash, now) {
      const id = sessionIdsByHash.get(tokenHash);
      return id === undefined ? null : unexpiredAt(sessions.get(id) ?? null, now);
    },
    async get(id, now) {
      return unexpiredAt(sessions.get(id) ?? null, now);
    },
    // A scan rather than a team index: sessions are minted by operators and purged within 30
    // days of their creation, so there are few, and data directories need no new index.
    async listByTeam(teamId, now) {
      const found: SessionRecord[] = [];
      for (const { value } of sessions.getRange()) {
        if (value.teamId === teamId && value.expiresAt > now) found.push(value);
      }
      return found.sort(newestFirst);
    },
    // Port: the first revocation time stays.
    revoke(id, at) {
      return sessions.transaction(() => {
        const session = unexpiredAt(sessions.get(id) ?? null, at);
        if (!session || session.revokedAt) return session;
        const next: SessionRecord = { ...session, revokedAt: at };
        sessions.putSync(id, next);
        return next;
      });
    },
    purgeExpired(now) {
      return purgeExpiredIn(sessions, sessionIdsByExpiry, now, (id) => {
        const session = sessions.get(id);
        if (!session || session.expiresAt > now) return false;
        sessions.removeSync(id);
        sessionIdsByHash.removeSync(session.tokenHash);
        return true;
      });
    },
  };
}
