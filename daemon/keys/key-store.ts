import type { ReadCancellation } from "#daemon/store/store.js";

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
  /** Set with replacedBy: the rotation's moment by the rotating daemon's clock (absent on older records). */
  replacedAt?: Date;
}

/** A rotation's mark on the key it replaces. */
export interface KeyReplacement {
  /** The id of the new key. */
  replacedBy: string;
  /** The rotation's moment, by the rotating daemon's clock. */
  at: Date;
  /** When the grace period ends: `at` itself for none. */
  graceEnd: Date;
}

/**
 * Whether a key has expired at `now`. A key replaced with no grace period left (its expiry no
 * later than its rotation's moment) has, whatever `now` reads: the rotation holds from the
 * moment it is stored on every daemon of the store, as a revocation does, though the rotating
 * daemon's clock may run ahead of this one's (spec 5.4, docs/behaviour.md "Key rotation"). A
 * grace period that has not ended then is an instant, read against `now`.
 */
export function keyExpired(
  key: Pick<ApiKeyRecord, "expiresAt" | "replacedAt">,
  now: Date,
): boolean {
  if (!key.expiresAt) return false;
  if (key.replacedAt && key.expiresAt <= key.replacedAt) return true;
  return key.expiresAt <= now;
}

/** Storage port for API keys. */
export interface KeyStore {
  /** Stores a new key. keyHash is unique: a second insert with the same hash rejects. */
  insert(key: ApiKeyRecord): Promise<void>;
  findByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  get(id: string): Promise<ApiKeyRecord | null>;
  /** A team's keys, newest first; `cancel` stops the read (ReadCancellation). */
  listByTeam(teamId: string, cancel?: ReadCancellation): Promise<ApiKeyRecord[]>;
  /** Whether the store holds any key at all (revoked and expired ones count): one bounded read. */
  holdsAny(): Promise<boolean>;
  /**
   * Marks the key revoked at `at` unless it already is (the first revocation time stays).
   * Returns the key after the change; null when there is no such key.
   */
  revoke(id: string, at: Date): Promise<ApiKeyRecord | null>;
  /**
   * A rotation's mark, once per key: records `replacedBy` and `replacedAt` (the rotation's `at`)
   * and makes the key expire at `graceEnd`, or keeps its current expiry when that is earlier.
   * Returns the key after the change; null when there is no such key, or it is revoked or
   * already replaced (a concurrent rotation won).
   */
  retire(id: string, replacement: KeyReplacement): Promise<ApiKeyRecord | null>;
}
