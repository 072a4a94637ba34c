import { messageOf } from "#daemon/errors.js";
import { REPEATED_FAILURE_LOG_MS } from "#daemon/logging.js";

/** Failures told in one line of an outage log. */
export interface OutageLine {
  /** Failures since the previous line; the line naming one (`cause`) counts it. */
  failures: number;
  /** The last of them in words (no stack: an outage is expected, not a bug to trace). */
  cause: string | undefined;
}

/** The two lines an outage log writes: what the daemon's outage looks like to one of its users. */
export interface OutageLines {
  /** The daemon fails: `failures` ≥ 1, the last one's `cause` given. */
  out(line: OutageLine): void;
  /** The daemon answers again after failures that were told or held back (`failures` ≥ 0). */
  back(line: OutageLine): void;
}

/** Tells the operator of the daemon's outages as a user of it (the gateway's REST, its loaders). */
export interface OutageLog {
  /** A call failed for want of the daemon. */
  failed(cause: unknown): void;
  /** The daemon answered a call. */
  answered(): void;
  /**
   * Whether an answer now would be told (an outage was said, or failures are held back): a call
   * started while this is false needs no watching for its answer.
   */
  readonly awaitsAnswer: boolean;
  /**
   * Its user has closed (the gateway): failures held back are told now rather than by a timer
   * that outlives it, and nothing is told after, so no line of a closed gateway follows its close.
   */
  close(): void;
}

/**
 * An outage log: the first failure of an outage is told at once, unless an `out` line was written
 * within `intervalMs` (REPEATED_FAILURE_LOG_MS unless a test shortens it), and then failures are
 * held back and told when that interval is over, counted, without waiting for a failure to come
 * after it. The first answer after an `out` line is a `back` line at once, counting the failures
 * held back until then, so no warning written after the daemon is back reads as a new outage; an
 * outage that begins and ends within the interval (held back, an answer after it) is told when the
 * interval is over as a `back` line counting its failures, never left out. So a daemon that comes
 * and goes, or fails some calls and answers others, makes at most an `out` line and two `back`
 * lines per interval. Once closed it writes nothing more.
 */
export function createOutageLog(
  lines: OutageLines,
  intervalMs = REPEATED_FAILURE_LOG_MS,
): OutageLog {
  let outAt = Number.NEGATIVE_INFINITY;
  /** An `out` line was written and no `back` line after it. */
  let saidOut = false;
  let held = 0;
  let heldCause: string | undefined;
  /** The daemon answered after the last failure held back. */
  let answeredSince = false;
  let flush: NodeJS.Timeout | undefined;
  let closed = false;

  const say = (kind: keyof OutageLines) => {
    clearTimeout(flush);
    flush = undefined;
    lines[kind]({ failures: held, cause: held > 0 ? heldCause : undefined });
    saidOut = kind === "out";
    if (saidOut) outAt = performance.now();
    held = 0;
  };
  const flushHeld = () => {
    flush = undefined;
    if (held > 0) say(answeredSince ? "back" : "out");
  };
  return {
    failed(cause) {
      if (closed) return;
      held += 1;
      heldCause = messageOf(cause);
      answeredSince = false;
      const wait = outAt + intervalMs - performance.now();
      if (wait <= 0) say("out");
      else if (!flush) {
        flush = setTimeout(flushHeld, wait);
        flush.unref();
      }
    },
    answered() {
      if (closed) return;
      if (saidOut) say("back");
      else if (held > 0) answeredSince = true;
    },
    get awaitsAnswer() {
      return !closed && (saidOut || (held > 0 && !answeredSince));
    },
    close() {
      if (closed) return;
      clearTimeout(flush);
      flushHeld();
      closed = true;
    },
  };
}

/**
 * Causes an outage log by cause follows at once: an outage has a few (the connection's failure, a
 * read unanswered after 5 s or after 2 s, a proxy's 503, the loader's bound on first reads); past
 * this many, the one that failed a call least recently tells what it holds back and is forgotten.
 */
const MAX_CAUSES = 32;

/**
 * An outage log per cause in words (createOutageLog each, all writing `lines` with `intervalMs`):
 * a failure of another cause is told at once, never held back behind the last line of another for
 * up to that interval, so each cause an operator has to act on is named as it starts; an answer
 * of the daemon ends each cause told (a `back` line for each).
 */
export function createOutageLogByCause(
  lines: OutageLines,
  intervalMs = REPEATED_FAILURE_LOG_MS,
): OutageLog {
  const causes = new Map<string, OutageLog>();
  let closed = false;
  return {
    failed(cause) {
      if (closed) return;
      const words = messageOf(cause);
      const log = causes.get(words) ?? createOutageLog(lines, intervalMs);
      // Re-inserted on use: the cause that failed a call least recently leaves first.
      causes.delete(words);
      causes.set(words, log);
      if (causes.size > MAX_CAUSES) {
        const [oldestWords, oldest] = causes.entries().next().value as [string, OutageLog];
        oldest.close();
        causes.delete(oldestWords);
      }
      log.failed(cause);
    },
    answered() {
      for (const log of causes.values()) log.answered();
    },
    get awaitsAnswer() {
      for (const log of causes.values()) if (log.awaitsAnswer) return true;
      return false;
    },
    close() {
      closed = true;
      for (const log of causes.values()) log.close();
    },
  };
}
