import { type DescMessage, type JsonValue, type MessageShape, toJson } from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import {
  type Timestamp,
  TimestampSchema,
  timestampDate,
  timestampFromMs,
} from "@bufbuild/protobuf/wkt";
import { isoTimeMs } from "#daemon/validation/patterns.js";
import { isIsoDateTime } from "#daemon/validation/rules.js";
import { isoTime } from "#gateway/json.js";

/**
 * A daemon message as `--json` prints it: the proto JSON mapping (camelCase) written as REST writes
 * the same objects, with every field present, so scripts can rely on `isActive: false`, `name: ""`
 * or `revokedAt: null` being there: a scalar at its default as that default, an unset time,
 * message or optional scalar (a key's `revokedAt`, a log row's `region`) as `null`
 * (docs/webhooks.md: "Absent optional fields are `null`"), and a time with its milliseconds,
 * `.000Z` included (restShaped).
 */
export function messageJson<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc> | undefined,
): JsonValue {
  if (message === undefined) return null;
  return restShaped(
    reflect(schema, message),
    toJson(schema, message, { alwaysEmitImplicit: true }),
  );
}

/**
 * `json`, the proto JSON of `message` with implicit fields emitted, as REST writes the same object,
 * in nested messages too: `null` for each field it leaves out (which only unset fields of explicit
 * presence are), and each time as isoTime writes it, with three fractional digits where the proto
 * JSON mapping drops a zero fraction (`…:05Z`) or writes six or nine. The other well-known types
 * (a Struct's object) have JSON of their own.
 */
function restShaped(message: ReflectMessage, json: JsonValue): JsonValue {
  if (message.desc.typeName === TimestampSchema.typeName) {
    return isoTime(message.message as Timestamp) ?? null;
  }
  if (!isObject(json) || message.desc.typeName.startsWith("google.protobuf.")) return json;
  for (const field of message.fields) {
    const value = json[field.jsonName];
    if (value === undefined) {
      json[field.jsonName] = null;
    } else if (field.fieldKind === "message") {
      json[field.jsonName] = restShaped(message.get(field), value);
    } else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) {
      const items = message.get(field);
      json[field.jsonName] = value.map((item, i) =>
        restShaped(items.get(i) as ReflectMessage, item),
      );
    } else if (field.fieldKind === "map" && field.mapKind === "message" && isObject(value)) {
      for (const [key, item] of message.get(field)) {
        const name = String(key);
        value[name] = restShaped(item as ReflectMessage, value[name] ?? null);
      }
    }
  }
  return json;
}

function isObject(value: JsonValue): value is { [key: string]: JsonValue } {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * A time as formatTime prints it: one value a line never breaks, though it holds a space
 * (wrapToWidth).
 */
export const FORMATTED_TIME = /\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}Z/;

/** A timestamp for humans: UTC to the second ("2026-05-01 14:03:09Z"), or "-" when unset. */
export function formatTime(timestamp: Timestamp | undefined): string {
  if (!timestamp) return "-";
  return timestampDate(timestamp)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
}

/**
 * A time a client wrote, as a subject's `clientUpdatedAt` keeps it (the state's
 * lastConsentTimestamp: any offset, up to nine fractional digits), shown as formatTime shows
 * every other time: UTC to the second. One the daemon's RFC 3339 rules do not read (a record
 * stored before they held) is shown as written, "-" when empty, so nothing stored is hidden.
 */
export function formatClientTime(value: string): string {
  if (!isIsoDateTime(value)) return value || "-";
  return formatTime(timestampFromMs(isoTimeMs(value)));
}

/**
 * Characters a terminal must not receive as they are from a value someone else stored: control
 * characters (C0, DEL, C1: escape sequences, bell, carriage return), the bidirectional
 * controls, which can show a URL or a name in another order than it has, and the line and
 * paragraph separators (U+2028, U+2029), which editors and line readers (Python's splitlines)
 * take for a line break.
 */
const UNSAFE = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/gu;
/** UNSAFE but C0, which JSON.stringify escapes in strings and uses between them (newlines). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;

const hex = (char: string, digits: number) =>
  (char.codePointAt(0) ?? 0).toString(16).padStart(digits, "0");

/**
 * Stored text as a terminal should show it: every UNSAFE character written as a visible escape
 * ("\x1b", "\u202e") and a backslash doubled, so a value someone else stored (a banner's
 * name, an older log row) can neither run an escape sequence in the operator's terminal nor
 * break a table's lines, and a literal "\x1b" never reads as an escaped one.
 */
export function printable(value: string): string {
  return value
    .replaceAll("\\", "\\\\")
    .replace(UNSAFE, (char) => (char < "\u0100" ? `\\x${hex(char, 2)}` : `\\u${hex(char, 4)}`));
}

/**
 * JSON as the CLI prints it: JSON.stringify, which escapes C0 characters itself, with the other
 * UNSAFE characters written as \u escapes too. The same JSON value, safe on a terminal.
 */
export function jsonText(value: unknown, indent?: number): string {
  return (JSON.stringify(value, null, indent) ?? "null").replace(
    UNSAFE_IN_JSON,
    (char) => `\\u${hex(char, 4)}`,
  );
}

/** A count with its noun, singular for one: "1 row", "1500 rows", "2 deliveries". */
export function counted(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

export function yesNo(value: boolean): string {
  return value ? "yes" : "no";
}

/** Help text listing examples; every command shows at least one (house rule for --help). */
export function examples(...lines: string[]): string {
  return `\nExamples:\n${lines.map((line) => `  $ ${line}`).join("\n")}\n`;
}

/** A message the daemon must always fill; its absence is a daemon bug, not an operator error. */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`the daemon's answer has no ${what}`);
  return value;
}
