/** A client's credential checks running in this process, and those waiting for room. */
interface Checks {
  running: number;
  waiting: Array<() => void>;
}

/**
 * Credential checks of one client (a counter bucket) run at most as many at once, in this
 * process, as the failed-authentication limit has room left for (spec 8). Counted only once it
 * has failed, a check sent beside many others would else be judged before any of them counted:
 * a burst of guesses would each be answered, a right one by its success, however far past the
 * limit the burst went. A check waits while the room is taken, and is let on (or refused, the
 * limit reached meanwhile) as the checks before it end. A bucket is forgotten once its last
 * check has ended.
 */
export class AttemptsInFlight {
  private readonly checks = new Map<string, Checks>();

  /**
   * Runs `check` once fewer checks of `bucket` run than `room()` allows, asking `room` again after
   * each wait; `room` may throw (the limit reached), and then `check` never runs.
   */
  async run<T>(bucket: string, room: () => Promise<number>, check: () => Promise<T>): Promise<T> {
    let woken = false;
    try {
      for (;;) {
        const left = await room();
        const checks = this.checksOf(bucket);
        if (checks.running < left) break;
        await new Promise<void>((resolve) => checks.waiting.push(resolve));
        woken = true;
      }
    } catch (error) {
      // Let on the next one waiting, as an ended check would have: refused, this one ran none.
      if (woken) this.ended(bucket);
      throw error;
    }
    this.checksOf(bucket).running += 1;
    try {
      return await check();
    } finally {
      this.checksOf(bucket).running -= 1;
      this.ended(bucket);
    }
  }

  /** A check of `bucket` ended, or gave up its turn: the next waiting goes on, or the bucket is forgotten. */
  private ended(bucket: string): void {
    const checks = this.checksOf(bucket);
    const next = checks.waiting.shift();
    if (next) next();
    else if (checks.running === 0) this.checks.delete(bucket);
  }

  private checksOf(bucket: string): Checks {
    let checks = this.checks.get(bucket);
    if (!checks) {
      checks = { running: 0, waiting: [] };
      this.checks.set(bucket, checks);
    }
    return checks;
  }
}
