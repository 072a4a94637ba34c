import { z } from "zod";
import type { ParsePayload } from "zod/v4/core";
import { US_OPT_OUT_PURPOSES } from "#daemon/subjects/state-vocabulary.js";
import { ISO_DATE_TIME, UUID_PATTERN } from "#daemon/validation/patterns.js";

/** Length in characters (code points), as the spec counts them. */
function charCount(value: string): number {
  let count = 0;
  for (const _ of value) count++;
  return count;
}

/** A UTF-16 surrogate not in a pair: text no UTF-8 store or client can keep as it was sent. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A string of min-max characters, all of them Unicode: JSON allows an unpaired surrogate escape
 * (`"\ud800"`), but it cannot be stored as written (stores and the wire use UTF-8), so it is
 * refused rather than answered back changed.
 */
export function text(min: number, max: number) {
  return (
    z
      .string()
      .refine(
        (value) => {
          const length = charCount(value);
          return length >= min && length <= max;
        },
        min === max
          ? `must be ${min} characters`
          : min === 0
            ? `must be at most ${max} characters`
            : `must be ${min}-${max} characters`,
      )
      .refine((value) => !LONE_SURROGATE.test(value), {
        message: "must be valid Unicode (it holds an unpaired surrogate)",
        ...IF_VALID_SO_FAR,
      })
      // Later rules on the same field (blank, "@") only speak once these pass (see onceValid).
      .pipe(onceValid)
  );
}

/**
 * A check that runs only while the value has no issue yet: one message per field, the first
 * rule it breaks.
 */
export const IF_VALID_SO_FAR = {
  when: (payload: ParsePayload) => payload.issues.length === 0,
};

/**
 * The end of a field's first rules: the rules chained after it run only once those passed.
 * zod's `abort: true` would do the same for the field, but an aborted issue also stops every
 * check across the list or body that holds the field (`when` checks included), which are meant
 * to report in the same answer (EVEN_WITH_FAILED_ENTRIES below).
 */
const onceValid = z.string();

/**
 * spec 2.4: a consent state's `languageCode` is 1-20 characters; the log route's (decisions §5)
 * and a banner's texts keys, which become it, are held to the same.
 */
export const LANGUAGE_CODE_MAX = 20;

/**
 * spec 2.4 and 8: a consent state's `revision` is 0-1,000,000; the log route's (decisions §5)
 * is held to the same, and a banner is published up to this revision, so every choice made
 * against it can be written and logged.
 */
export const MAX_REVISION = 1_000_000;

/** C0 controls, DEL and C1 controls: what a terminal may read as a command rather than text. */
const CONTROL = /\p{Cc}/u;

/**
 * Text of min-max characters and no control character (not even a line break): a label or a
 * description an operator reads in a terminal (`consentctl logs`, `webhooks list`), where an
 * escape sequence would be run rather than shown. Names (displayName) are held to it too.
 */
export function label(min: number, max: number) {
  return text(min, max).refine(
    (value) => !CONTROL.test(value),
    "must not contain control characters",
  );
}

/**
 * A character that shows: not white space, nor an invisible format character such as U+200B,
 * nor a letter drawn as a blank (the Hangul fillers, the blank Braille pattern).
 */
const VISIBLE = /[^\p{White_Space}\p{Cf}\u115F\u1160\u2800\u3164\uFFA0]/u;

/**
 * A name people read and tell apart (a team's, a key's, a banner's): a label of at most `max`
 * characters that is not blank, where spaces and invisible format characters alone are blank.
 * `optional`: an empty name is allowed (a key's).
 */
export function displayName(max: number, { optional = false } = {}) {
  return label(optional ? 0 : 1, max).refine(
    (value) => (optional && value === "") || VISIBLE.test(value),
    { message: "must not be blank", ...IF_VALID_SO_FAR },
  );
}

/**
 * spec 2.4 `usOptOutChoices` and the log payload's `purposeChoices` (decisions §5): the US opt-out
 * purposes, each a yes or no. Strict in a stored state, tolerant in the evolving log payload.
 */
export const usOptOutPurposes = Object.fromEntries(
  US_OPT_OUT_PURPOSES.map((purpose) => [purpose, z.boolean().optional()]),
) as Record<(typeof US_OPT_OUT_PURPOSES)[number], z.ZodOptional<z.ZodBoolean>>;

/**
 * spec 2.4 `services`, in a stored state and in the log payload alike, with the bounds the spec
 * leaves open (docs/behaviour.md): category name → the names of its accepted services, as
 * labels, at most 100 per category as a banner's configuration allows.
 */
export const consentServices = z.record(label(1, 100), z.array(label(1, 100)).max(100));

/** An integer within [min, max]. */
export function integer(min: number, max: number) {
  return z
    .number({
      error: (issue) => (issue.input === undefined ? "is required" : "must be an integer"),
    })
    .refine(
      (value) => Number.isInteger(value) && value >= min && value <= max,
      `must be an integer from ${min} to ${max}`,
    );
}

/** A UUID in its canonical 8-4-4-4-12 hexadecimal form. */
export const uuid = z.string().regex(UUID_PATTERN, "must be a UUID");

/** Whether `value` is an ISO 8601 date-time of a real calendar day that Date can read. */
export function isIsoDateTime(value: string): boolean {
  const parts = ISO_DATE_TIME.exec(value);
  if (!parts || Number.isNaN(Date.parse(value))) return false;
  // Date.parse rolls a day past the month's end over (2026-02-30 reads as March 2): the day must
  // come back unchanged from the calendar.
  const [year, month, day] = [Number(parts[1]), Number(parts[2]) - 1, Number(parts[3])];
  // setUTCFullYear, not Date.UTC, which reads years 0-99 as 1900-1999 (0000-02-29 is a leap day
  // in ISO 8601's proleptic calendar, 1900-02-29 is not).
  const date = new Date(0);
  date.setUTCFullYear(year, month, day);
  return date.getUTCMonth() === month && date.getUTCDate() === day;
}

/**
 * The instant of a valid ISO 8601 date-time (isIsoDateTime) in nanoseconds since the epoch, so
 * two timestamps compare with all 9 fractional digits the rule accepts (Date keeps 3). Offsets are
 * whole minutes, so the fraction of a second is the same in UTC.
 */
export function isoInstant(value: string): bigint {
  const fraction = ISO_DATE_TIME.exec(value)?.[5] ?? "";
  const seconds = Date.parse(fraction ? value.replace(fraction, "") : value);
  return BigInt(seconds) * 1_000_000n + BigInt(fraction.slice(1).padEnd(9, "0"));
}

/** An ISO 8601 date-time with seconds and a time zone, e.g. 2026-01-31T12:00:00Z. */
export const isoDateTime = z
  .string()
  .refine(
    isIsoDateTime,
    "must be an ISO 8601 date-time with a time zone, e.g. 2026-01-31T12:00:00Z",
  );

/**
 * The first value of `values` whose comparison key an earlier value already had, with that
 * earlier value: `[earlier, repeated]`.
 */
export function firstRepeat<T>(
  values: readonly T[],
  keyOf: (value: T) => string,
): [T, T] | undefined {
  const seen = new Map<string, T>();
  for (const value of values) {
    const earlier = seen.get(keyOf(value));
    if (earlier !== undefined) return [earlier, value];
    seen.set(keyOf(value), value);
  }
  return undefined;
}

/** A list's check that no string in it comes twice; entries that are not strings are skipped. */
export function noRepeats(what: string) {
  return (values: readonly unknown[], ctx: z.RefinementCtx) => {
    const named = values.filter((value): value is string => typeof value === "string");
    const repeat = firstRepeat(named, (value) => value);
    if (repeat)
      ctx.addIssue({ code: "custom", message: `must not repeat a ${what}: ${repeat[1]}` });
  };
}

/**
 * Lets a check on a whole list run even when some of its entries failed their own rules (zod
 * skips it by default), so one answer lists every violation instead of revealing them a round
 * at a time. The check then sees the entries as sent and compares only those it can read.
 */
export const EVEN_WITH_FAILED_ENTRIES = {
  when: (payload: ParsePayload) => Array.isArray(payload.value),
};

/** google.protobuf.Timestamp's range (timestamp.proto): 0001-01-01T00:00:00Z … 9999-12-31T23:59:59Z. */
const TIMESTAMP_SECONDS = { min: -62_135_596_800n, max: 253_402_300_799n } as const;

/** A google.protobuf.Timestamp within the type's own range (timestamp.proto). */
const protoTimestampFields = z
  .object({ seconds: z.bigint(), nanos: z.number() })
  .refine(
    ({ seconds, nanos }) =>
      seconds >= TIMESTAMP_SECONDS.min &&
      seconds <= TIMESTAMP_SECONDS.max &&
      Number.isInteger(nanos) &&
      nanos >= 0 &&
      nanos <= 999_999_999,
    "must be a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z",
  );

/**
 * A google.protobuf.Timestamp of a typed request (gRPC), read as a Date. A value outside the
 * type's own range (milliseconds or microseconds sent as seconds, a negative `nanos`) is no time:
 * it is a violation of its field, not a date past year 9999 stored and later unreadable, nor one
 * a JavaScript Date cannot hold.
 */
export const protoTimestamp = protoTimestampFields
  // Milliseconds rounded down, not timestampDate's rounding to nearest: 9999-12-31T23:59:59.9995Z
  // would become year 10000, a time the type cannot carry back out.
  .transform(({ seconds, nanos }) => new Date(Number(seconds) * 1000 + Math.floor(nanos / 1e6)));

/**
 * A bound of a time range over times kept to the millisecond (a consent log row's receipt),
 * validated as protoTimestamp and read as the first millisecond at or after it: a time at or
 * after `T` is one at or after it, and a time before `T` is one before it, whatever fraction of a
 * millisecond `T` carries. Only compared with, never stored or sent back, so a bound in the last
 * millisecond of 9999 may read as the first of year 10000.
 */
export const protoTimeBound = protoTimestampFields.transform(
  ({ seconds, nanos }) => new Date(Number(seconds) * 1000 + Math.ceil(nanos / 1e6)),
);

/** A request's google.protobuf.Timestamp as protoTimestamp reads it (seconds and nanos). */
export type ProtoTimestamp = z.input<typeof protoTimestamp>;
