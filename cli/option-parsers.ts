import { type Command, InvalidArgumentError } from "commander";
import { EXIT_USAGE } from "#cli/problems.js";
import { daemonAddressProblem, outOfRangePort, withoutUserInfo } from "#daemon/config.js";
import { isIsoDateTime } from "#daemon/validation/rules.js";

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;
const DURATION = /^(?:\d+[smhd])+$/;

/**
 * Reads a duration such as `24h`, `30m`, `7d`, `1h30m` or `0` as whole seconds. A bare number
 * other than 0 is refused: "10" could mean seconds or hours, and a key rotation is no place to guess.
 */
export function parseDuration(value: string, zeroAllowed = true): number {
  const text = value.trim();
  if (text === "0") return 0;
  if (!DURATION.test(text)) {
    const examples = zeroAllowed ? "24h, 30m, 7d, or 0" : "24h, 30m or 7d";
    throw new InvalidArgumentError(
      `"${value}" is not a duration; use a number with a unit (s, m, h, d), e.g. ${examples}.`,
    );
  }
  let seconds = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+)([smhd])/g)) {
    seconds += Number(amount) * UNIT_SECONDS[unit as keyof typeof UNIT_SECONDS];
  }
  if (!Number.isSafeInteger(seconds) || seconds > 2 ** 31 - 1) {
    throw new InvalidArgumentError(`"${value}" is too long a duration.`);
  }
  return seconds;
}

/** Reads a duration (parseDuration) from `min` to `max` seconds: an option with a range. */
export function durationIn(min: number, max: number): (value: string) => number {
  return (value) => {
    // An option whose range excludes 0 does not suggest it.
    const seconds = parseDuration(value, min === 0);
    if (seconds < min || seconds > max) {
      throw new InvalidArgumentError(
        `"${value}" is out of range: from ${formatDuration(min)} to ${formatDuration(max)}.`,
      );
    }
    return seconds;
  };
}

/** Hours and minutes without seconds (`2026-01-31T12:00Z`): an operator's shorthand for `:00`. */
const MINUTES_ONLY = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(?=Z|[+-])/i;

/**
 * Reads an ISO 8601 date-time with an explicit zone (`2026-01-31T12:00:00Z`) as a Date, by the
 * daemon's own RFC 3339 profile: an impossible day (`2027-02-30`) or `24:00` is refused where
 * Date would move it to another day, and a date without a zone, which Date would read in the
 * operator's local zone, is refused as ambiguous.
 */
export function parseIsoDateTime(value: string): Date {
  const withSeconds = value.replace(MINUTES_ONLY, "$1:00");
  if (!isIsoDateTime(withSeconds)) {
    throw new InvalidArgumentError(
      `"${value}" is not an ISO 8601 date-time with a zone on a real calendar day (hours 00-23), e.g. 2099-12-31T23:59:59Z.`,
    );
  }
  return new Date(withSeconds);
}

/** The digits of a date-time's seconds fraction past the millisecond, that a Date drops. */
const PAST_MILLISECONDS = /\.\d{3}(\d*)(?=Z|[+-])/i;

/**
 * Reads a bound of a time range: an ISO 8601 date-time with a zone, or a duration meaning that
 * long before now (`24h`, `7d`, `90m`), so `--since 24h` is "the last day". The daemon keeps
 * times to the millisecond: a date-time within one (`…:00.5004Z`) is read as the next
 * millisecond, so a row received at `.500` is before it (outside `--since`, inside `--until`),
 * as it is, rather than at it.
 */
export function parseTimeBound(value: string, now = new Date()): Date {
  if (/^\s*(?:\d+[smhd])+\s*$/.test(value)) {
    return new Date(now.getTime() - parseDuration(value) * 1000);
  }
  // Something dated gets the date-time's own complaint (an impossible day, a missing zone).
  if (/^\d{4}-\d{2}-\d{2}T/i.test(value)) {
    const at = parseIsoDateTime(value);
    const finer = PAST_MILLISECONDS.exec(value)?.[1] ?? "";
    return /[1-9]/.test(finer) ? new Date(at.getTime() + 1) : at;
  }
  throw new InvalidArgumentError(
    `"${value}" is neither a date-time with a zone (2026-05-01T00:00:00Z) nor a duration before now (24h, 7d).`,
  );
}

/** Reads a whole number from `min` to `max` (a page size). */
export function integerIn(min: number, max: number): (value: string) => number {
  return (value) => {
    const number = Number(value);
    if (!/^\d+$/.test(value.trim()) || number < min || number > max) {
      throw new InvalidArgumentError(`"${value}" is not a whole number from ${min} to ${max}.`);
    }
    return number;
  };
}

/**
 * A parser that refuses an empty value, naming `what` ("the team id"). An empty argument is most
 * often a shell variable that is not set (`--team "$TEAM"`): a wrong command line (exit 2), never
 * sent on to the daemon or read as the working directory.
 */
export function nonEmpty(what: string): (value: string) => string {
  return (value) => {
    if (value.trim() === "") {
      throw new InvalidArgumentError(`${what} is empty (is the variable it came from set?).`);
    }
    return value;
  };
}

/**
 * A value sent as call metadata (the token, the team id): never empty (nonEmpty), and only visible
 * ASCII, as every token and id the service makes is. A space, a line break or an escape sequence
 * (a stray character from a paste or a script) is a wrong command line (exit 2), said as such,
 * rather than a header the HTTP/2 client cannot send.
 */
export function metadataValue(what: string): (value: string) => string {
  const present = nonEmpty(what);
  return (value) => {
    const problem = metadataValueProblem(present(value));
    if (problem) throw new InvalidArgumentError(`${what} ${problem}.`);
    return value;
  };
}

/**
 * An id the service made (a team's, a key's, a banner's, a webhook's…), given as an argument:
 * visible ASCII (metadataValue's rule: a space or a carriage return from a paste), and no final
 * punctuation, which no id has and a copy out of a sentence ("Created team <id>.") brings along.
 * Said as a wrong command line (exit 2), where the daemon would answer "not found" for an id that
 * looks right.
 */
export function serviceId(what: string): (value: string) => string {
  const visible = metadataValue(what);
  return (value) => {
    // A credential pasted here is refused by the action (refuseCredential), which does not print
    // it: a refusal here would, as commander quotes the value it refuses.
    if (credentialGiven(value)) return value;
    visible(value);
    const last = value.at(-1) ?? "";
    if (".,;:".includes(last)) {
      throw new InvalidArgumentError(
        `${what} "${value}" ends with "${last}", which no id has (copied with a sentence's punctuation?).`,
      );
    }
    return value;
  };
}

/** Why a value cannot be call metadata, or undefined when it can (metadataValue). */
export function metadataValueProblem(value: string): string | undefined {
  return /^[\x21-\x7e]+$/.test(value)
    ? undefined
    : "holds a space, a control character or a non-ASCII character, which no token or id has";
}

/** Reads a comma-separated list (`banners:read,consent:read`), dropping blanks and repeats. */
export function parseList(value: string): string[] {
  const items = value
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
  if (items.length === 0) throw new InvalidArgumentError("expected a comma-separated list.");
  return [...new Set(items)];
}

/**
 * Reads a comma-separated list whose items come from a fixed vocabulary; an item outside it is a
 * wrong command line (exit 2), named with the whole vocabulary.
 */
export function listOf(noun: string, allowed: readonly string[]): (value: string) => string[] {
  return (value) => {
    const items = parseList(value);
    const unknown = items.filter((item) => !allowed.includes(item));
    if (unknown.length > 0) {
      throw new InvalidArgumentError(
        `unknown ${noun} ${unknown.join(", ")}; the ${noun}s are ${allowed.join(", ")}.`,
      );
    }
    return items;
  };
}

/** Reads `--daemon`: an http(s) URL of the daemon's port alone, such as `http://127.0.0.1:50051`. */
export function parseDaemonUrl(sent: string): string {
  // Quoted without its user info (`user:password@`), which a shell history already holds but a
  // terminal shared or recorded need not show again.
  const value = withoutUserInfo(sent);
  let url: URL;
  try {
    url = new URL(sent);
  } catch {
    const port = outOfRangePort(sent);
    throw new InvalidArgumentError(
      port === undefined
        ? `"${value}" is not an absolute URL, e.g. http://127.0.0.1:50051.`
        : `"${value}" names port ${port}; a port is a number from 1 to 65535.`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new InvalidArgumentError(`"${value}" must be an http:// or https:// URL.`);
  }
  const problem = daemonAddressProblem(url);
  if (problem) throw new InvalidArgumentError(`The daemon URL ${problem}.`);
  return url.toString().replace(/\/$/, "");
}

/** Formats seconds back into the largest exact unit, for messages ("24h", "90m", "0"). */
export function formatDuration(seconds: number): string {
  if (seconds === 0) return "0";
  for (const [unit, size] of [
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
  ] as const) {
    if (seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}

/** The prefixes of the service's credentials, and what one given as an id is. */
const CREDENTIALS = [
  ["ck_live_", "an API key itself, not its id"],
  ["ck_test_", "an API key itself, not its id"],
  ["cs_", "a session token itself, not the session's id"],
  ["consent_op_", "the operator token, not an id"],
  ["whsec_", "a webhook signing secret, not an id"],
] as const;

/** What a credential given where an id belongs is ("an API key itself, not its id"), if it is one. */
function credentialGiven(id: string): string | undefined {
  const value = id.trim();
  return CREDENTIALS.find(([prefix]) => value.startsWith(prefix))?.[1];
}

/**
 * Refuses a credential given where an id belongs (`keys revoke ck_live_…`, `sessions revoke
 * cs_…`, pasted from where it was shown), before it is sent and echoed back as "No … with id
 * ck_live_…". In the action, not an argument parser: commander quotes a refused argument in its
 * message. The prefix alone decides (every key and session token has one): a credential cut
 * short or mistyped still carries most of its secret.
 */
export function refuseCredential(command: Command, id: string, hint: string): void {
  const what = credentialGiven(id);
  if (what) {
    command.error(`error: that is ${what} (it was not sent, nor is it printed here); ${hint}`);
  }
}

/**
 * An option parser for a value that is a secret or may carry one (`--token`, a `--daemon` URL
 * with `user:password@`), whose refusal says what is wrong without the value: commander quotes a
 * value its parser refuses ("option '--token <token>' argument '…' is invalid"), into a terminal
 * or a CI log. The refusal is a usage error (exit 2) as commander's, printed the same way (JSON
 * with --json); its code is not commander's, which commander would quote the value for again.
 */
export function unquotedRefusal<T>(
  command: Command,
  flags: string,
  parse: (value: string) => T,
): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      return command.error(`error: option '${flags}' is invalid: ${error.message}`, {
        exitCode: EXIT_USAGE,
        code: "consentctl.unquotedArgument",
      });
    }
  };
}
