import { type DescMessage, type JsonValue, type MessageShape, toJson } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";

/**
 * A daemon message as `--json` prints it: the proto JSON mapping (camelCase, RFC 3339 times),
 * with every field present, so scripts can rely on `isActive: false`, `name: ""` or
 * `revokedAt: null` being there: a scalar at its default as that default, an unset time, message
 * or optional scalar (a key's `revokedAt`, a log row's `region`) as `null`, as REST writes the
 * same objects (docs/webhooks.md: "Absent optional fields are `null`").
 */
export function messageJson<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc> | undefined,
): JsonValue {
  if (message === undefined) return null;
  const json = toJson(schema, message, { alwaysEmitImplicit: true });
  nullForUnset(schema, json);
  return json;
}

/**
 * Sets `null` for each field of `schema` that `json` (its proto JSON, implicit fields emitted)
 * leaves out, which only unset fields of explicit presence are, in nested messages too. The
 * well-known types (a Timestamp's string, a Struct's object) have JSON of their own.
 */
function nullForUnset(schema: DescMessage, json: JsonValue | undefined): void {
  if (json === undefined || !isObject(json) || schema.typeName.startsWith("google.protobuf.")) {
    return;
  }
  for (const field of schema.fields) {
    const value = json[field.jsonName];
    if (value === undefined) {
      json[field.jsonName] = null;
    } else if (field.fieldKind === "message") {
      nullForUnset(field.message, value);
    } else if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) {
      for (const item of value) nullForUnset(field.message, item);
    } else if (field.fieldKind === "map" && field.mapKind === "message" && isObject(value)) {
      for (const item of Object.values(value)) nullForUnset(field.message, item);
    }
  }
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
