/** A client's credential checks running in this process, and those waiting for room. */
interface Checks {
  running: number;
  waiting: Array<() => void>;
}

/**
 * Waits in `checks` until an ended check wakes this one, or until `signal` is aborted: then its
 * place is left (no wake was owed to it) and the signal's reason thrown. `first`: ahead of every
 * other waiting, as one woken that found no room (a check come meanwhile took it) still is.
 */
function waitIn(checks: Checks, first: boolean, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const leave = () => {
      const at = checks.waiting.indexOf(wake);
      if (at >= 0) checks.waiting.splice(at, 1);
      reject(signal?.reason);
    };
    const wake = () => {
      signal?.removeEventListener("abort", leave);
      resolve();
    };
    if (first) checks.waiting.unshift(wake);
    else checks.waiting.push(wake);
    signal?.addEventListener("abort", leave, { once: true });
  });
}

/**
 * Credential checks of one client (a counter bucket) run at most as many at once, in this
 * process, as the failed-authentication limit has room left for (spec 8). Counted only once it
 * has failed, a check sent beside many others would else be judged before any of them counted:
 * a burst of guesses would each be answered, a right one by its success, however far past the
 * limit the burst went. A check waits while the room is taken, and is let on (or refused, the
 * limit reached meanwhile) as the checks before it end, the one waiting longest first. A check
 * whose caller has gone (its call's signal aborted) leaves its place, so the checks behind it are
 * not held up by answers no one reads. A bucket is forgotten once its last check has ended.
 */
export class AttemptsInFlight {
  private readonly checks = new Map<string, Checks>();

  /**
   * Runs `check` once fewer checks of `bucket` run than `room()` allows, asking `room` again after
   * each wait; `room` may throw (the limit reached), and then `check` never runs. A check that
   * must wait reads `signalOf()` (a call's context makes its signal on first use, and most checks
   * never wait): once that is aborted, it throws its reason instead, waiting no longer.
   */
  async run<T>(
    bucket: string,
    room: () => Promise<number>,
    check: () => Promise<T>,
    signalOf?: () => AbortSignal,
  ): Promise<T> {
    // Woken by an ended check: the turn is this one's, to run or to hand on.
    let turn = false;
    let checks: Checks;
    let left: number;
    try {
      for (;;) {
        left = await room();
        checks = this.checksOf(bucket);
        if (checks.running < left) break;
        const signal = signalOf?.();
        signal?.throwIfAborted();
        const first = turn;
        turn = false;
        await waitIn(checks, first, signal);
        turn = true;
        signal?.throwIfAborted();
      }
    } catch (error) {
      // Let on the next one waiting, as an ended check would have: refused, this one ran none.
      if (turn) this.ended(bucket);
      throw error;
    }
    checks.running += 1;
    // Room for more than this one (the limit's window began anew while they waited): the next
    // waiting goes on too, as it would once a check ended, instead of one at a time.
    if (checks.running < left) checks.waiting.shift()?.();
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
