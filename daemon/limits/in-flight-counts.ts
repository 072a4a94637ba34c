/**
 * Calls in flight in this process, counted by key (a team, a client address): what a bound on
 * calls at once (a team's tails, its TestWebhook sends, its webhook host-name lookups, an
 * address's health watches) reads before it lets one more on. A key with none left is forgotten.
 */
export class InFlightCounts {
  private readonly counts = new Map<string, number>();

  /** How many calls of `key` are in flight. */
  of(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  /** One more call of `key` in flight: to be given back by `leave` however it ends. */
  enter(key: string): void {
    this.counts.set(key, this.of(key) + 1);
  }

  /** A call of `key` ended. */
  leave(key: string): void {
    const left = this.of(key) - 1;
    if (left > 0) this.counts.set(key, left);
    else this.counts.delete(key);
  }
}
