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

/** Storage port for dashboard sessions. */
export interface SessionStore {
  /** Stores a new session. tokenHash is unique: a second insert with the same hash rejects. */
  insert(session: SessionRecord): Promise<void>;
  findByHash(tokenHash: string): Promise<SessionRecord | null>;
  get(id: string): Promise<SessionRecord | null>;
  /**
   * Marks the session revoked at `at` unless it already is (the first revocation time stays).
   * Returns the session after the change; null when there is no such session.
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
