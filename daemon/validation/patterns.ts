/**
 * Patterns the daemon's rules and the banner runtime both check (the runtime bundles this module
 * alone, so it imports nothing).
 */

/** A UUID in its canonical 8-4-4-4-12 hexadecimal form. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * RFC 3339's profile of ISO 8601: hours 00-23 (not ISO's 24:00 for the end of a day, which Date
 * reads as the next midnight), minutes and seconds 00-59, up to 9 fractional digits, an offset
 * within a day; `T` and `Z` in either case.
 */
export const ISO_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/i;

/**
 * The milliseconds since the epoch of an ISO_DATE_TIME value, NaN for any other. The value is
 * rewritten into ECMAScript's own date-time string format (upper-case `T` and `Z`, exactly three
 * fractional digits), the one form every engine's Date.parse must read: engines differ on the
 * others (lower case, more or fewer digits), which the API accepts and hands back as written.
 */
export function isoTimeMs(value: string): number {
  const parts = ISO_DATE_TIME.exec(value);
  if (!parts) return Number.NaN;
  const fraction = (parts[5] ?? ".").slice(1).padEnd(3, "0").slice(0, 3);
  const zone = (parts[6] as string).toUpperCase();
  return Date.parse(`${value.slice(0, 19).toUpperCase()}.${fraction}${zone}`);
}
