import { type DescMessage, type JsonValue, type MessageShape, toJson } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";

/**
 * A daemon message as `--json` prints it: the proto JSON mapping (camelCase, RFC 3339 times),
 * with every scalar present even at its default, so scripts can rely on `isActive: false` or
 * `name: ""` being there. Unset optional times (a key's `revokedAt`) stay absent.
 */
export function messageJson<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc> | undefined,
): JsonValue {
  if (message === undefined) return null;
  return toJson(schema, message, { alwaysEmitImplicit: true });
}

/** A timestamp for humans: UTC to the second ("2026-05-01 14:03:09Z"), or "-" when unset. */
export function formatTime(timestamp: Timestamp | undefined): string {
  if (!timestamp) return "-";
  return timestampDate(timestamp)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
}

/**
 * Stored text as a terminal should show it: control characters (C0, DEL, C1) written as visible
 * escapes ("\\x1b"), so a value someone else stored (a banner's name, an older log row) can
 * neither run an escape sequence in the operator's terminal nor break a table's lines.
 */
export function printable(value: string): string {
  return value.replace(
    /\p{Cc}/gu,
    (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, "0")}`,
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
