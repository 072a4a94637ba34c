/**
 * Storage port for rate-limit counters. Counters are shared by every daemon on the same store,
 * so limits hold across processes and machines (decisions §2). Counter names never contain a raw
 * IP address.
 */
export interface CounterStore {
  /**
   * Adds 1 to the counter and returns the count after the addition. A new counter, or one expired
   * at `now`, starts at 0 and is kept at least until `expiresAt`. Concurrent increments are never
   * lost. `now` is the daemon's clock, the same one that chose the window.
   */
  increment(name: string, expiresAt: Date, now: Date): Promise<number>;
  /** The current count; 0 when the counter does not exist or has expired at `now`. */
  get(name: string, now: Date): Promise<number>;
  /** Removes counters whose expiry is at or before `now`; returns how many. */
  purgeExpired(now: Date): Promise<number>;
}
