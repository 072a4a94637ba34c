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
 * within REPEATED_FAILURE_LOG_MS, and then failures are held back and told when that interval is
 * over, counted, without waiting for a failure to come after it. The first answer after an `out`
 * line is a `back` line at once, counting the failures held back until then, so no warning written
 * after the daemon is back reads as a new outage; an outage that begins and ends within the
 * interval (held back, an answer after it) is told when the interval is over as a `back` line
 * counting its failures, never left out. So a daemon that comes and goes, or fails some calls and
 * answers others, makes at most an `out` line and two `back` lines per interval. Once closed it
 * writes nothing more.
 */
export function createOutageLog(lines: OutageLines): OutageLog {
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
      const wait = outAt + REPEATED_FAILURE_LOG_MS - performance.now();
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
