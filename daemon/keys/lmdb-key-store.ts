import type { Database } from "lmdb";
import type { ApiKeyRecord, KeyStore } from "#daemon/keys/key-store.js";
import { prefixRange } from "#daemon/store/lmdb-keys.js";
import { DuplicateKeyError } from "#daemon/store/store.js";

/** Key of the per-team listing: `[teamId, createdAt in ms, id]`, so a reverse scan is newest first. */
type TeamKeyKey = [teamId: string, createdAtMs: number, id: string];

/** The named databases of the key store: records by id and the two indexes that point at them. */
export interface LmdbKeyDatabases {
  keys: Database<ApiKeyRecord, string>;
  /** keyHash → id; also enforces that keyHash is unique. */
  keyIdsByHash: Database<string, string>;
  /** [teamId, createdAtMs, id] → id. */
  keyIdsByTeam: Database<string, TeamKeyKey>;
}

/** KeyStore over LMDB; a key and its index entries are written in one transaction. */
export function createLmdbKeyStore(dbs: LmdbKeyDatabases): KeyStore {
  const { keys, keyIdsByHash, keyIdsByTeam } = dbs;

  /** Applies `change` to the stored key inside one write transaction; null when there is none. */
  function update(id: string, change: (key: ApiKeyRecord) => ApiKeyRecord | null) {
    return keys.transaction(() => {
      const key = keys.get(id);
      if (!key) return null;
      const next = change(key);
      if (!next) return key;
      keys.putSync(id, next);
      return next;
    });
  }

  return {
    async insert(key) {
      await keys.transaction(() => {
        // Checked before any write: lmdb does not roll back a callback that throws.
        if (keys.doesExist(key.id)) throw new DuplicateKeyError("key id");
        if (keyIdsByHash.doesExist(key.keyHash)) throw new DuplicateKeyError("keyHash");
        keys.putSync(key.id, key);
        keyIdsByHash.putSync(key.keyHash, key.id);
        keyIdsByTeam.putSync([key.teamId, key.createdAt.getTime(), key.id], key.id);
      });
    },
    async findByHash(keyHash) {
      const id = keyIdsByHash.get(keyHash);
      return id === undefined ? null : (keys.get(id) ?? null);
    },
    async get(id) {
      return keys.get(id) ?? null;
    },
    async listByTeam(teamId) {
      const range = keyIdsByTeam.getRange(prefixRange(teamId, "descending"));
      return Array.from(range, ({ value }) => keys.get(value)).filter((key) => key !== undefined);
    },
    async holdsAny() {
      return keys.getKeysCount({ limit: 1 }) > 0;
    },
    // Port: the first revocation time stays.
    revoke(id, at) {
      return update(id, (key) => (key.revokedAt ? null : { ...key, revokedAt: at }));
    },
    // Port: an earlier current expiry is kept.
    retire(id, { replacedBy, at, graceEnd }) {
      return keys.transaction(() => {
        const key = keys.get(id);
        if (!key || key.revokedAt || key.replacedBy) return null;
        const expiresAt = key.expiresAt && key.expiresAt <= graceEnd ? key.expiresAt : graceEnd;
        const next = { ...key, replacedBy, replacedAt: at, expiresAt };
        keys.putSync(id, next);
        return next;
      });
    },
  };
}
