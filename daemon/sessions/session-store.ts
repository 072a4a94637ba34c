/** A dashboard session as stored: only the SHA-256 of its token (decisions §2). */
export interface SessionRecord {
  id: string;
  teamId: string;
  /** Lower-case hex SHA-256 of the token. Unique. */
  tokenHash: string;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

/**
 * Storage port for dashboard sessions. A session is absent from its expiry on (expiresAt at or
 * before the caller's `now`) for every call, whether or not a purge has removed it yet: the
 * embedded store keeps it until purgeExpired, MongoDB's TTL monitor drops it about a minute
 * after its expiry, and neither moment may decide what a caller sees.
 */
export interface SessionStore {
  /** Stores a new session. tokenHash is unique: a second insert with the same hash rejects. */
  insert(session: SessionRecord): Promise<void>;
  /** The session with this token hash unexpired at `now`; null otherwise. */
  findByHash(tokenHash: string, now: Date): Promise<SessionRecord | null>;
  /** The session with this id unexpired at `now`; null otherwise. */
  get(id: string, now: Date): Promise<SessionRecord | null>;
  /**
   * Marks the session revoked at `at` unless it already is (the first revocation time stays).
   * Returns the session after the change; null when there is no such session unexpired at `at`.
   */
  revoke(id: string, at: Date): Promise<SessionRecord | null>;
  /**
   * The team's sessions whose expiry is after `now`, revoked ones included, newest first (by
   * createdAt, then id).
   */
  listByTeam(teamId: string, now: Date): Promise<SessionRecord[]>;
  /** Removes sessions whose expiry is at or before `now`; returns how many. */
  purgeExpired(now: Date): Promise<number>;
}

/** A session as the port's reads give it at `now`: null from its expiry on (SessionStore). */
export function unexpiredAt<T extends { expiresAt: Date }>(session: T | null, now: Date): T | null {
  return session && session.expiresAt > now ? session : null;
}
