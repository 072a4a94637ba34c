export type Environment = "live" | "test";

/** An API key as stored: never the key itself, only its SHA-256 (decisions §2). */
export interface ApiKeyRecord {
  id: string;
  teamId: string;
  environment: Environment;
  name: string;
  scopes: string[];
  /** Lower-case hex SHA-256 of the full key. Unique. */
  keyHash: string;
  /** Prefix and last four characters, for recognising a key in listings. */
  hint: string;
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
  /** Set once by a rotation: the id of the key that replaced this one (absent on older records). */
  replacedBy?: string;
}

/** Storage port for API keys. */
export interface KeyStore {
  /** Stores a new key. keyHash is unique: a second insert with the same hash rejects. */
  insert(key: ApiKeyRecord): Promise<void>;
  findByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  get(id: string): Promise<ApiKeyRecord | null>;
  /** A team's keys, newest first. */
  listByTeam(teamId: string): Promise<ApiKeyRecord[]>;
  /**
   * Marks the key revoked at `at` unless it already is (the first revocation time stays).
   * Returns the key after the change; null when there is no such key.
   */
  revoke(id: string, at: Date): Promise<ApiKeyRecord | null>;
  /**
   * A rotation's mark, once per key: records `replacedBy` and makes the key expire at `at`, or
   * keeps its current expiry when that is earlier. Returns the key after the change; null when
   * there is no such key, or it is revoked or already replaced (a concurrent rotation won).
   */
  retire(id: string, replacedBy: string, at: Date): Promise<ApiKeyRecord | null>;
}
