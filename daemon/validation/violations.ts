import type { z } from "zod";
import type { Violation } from "#daemon/errors.js";

type Issue = z.core.$ZodIssue;

/**
 * Parses `input` with a zod schema and returns either the value or one violation per failed rule,
 * each message naming its field ("subjectId must be 1-256 characters") as spec 7 asks of `details`.
 */
export function check<T>(
  schema: z.ZodType<T>,
  input: unknown,
): { value: T } | { violations: Violation[] } {
  const result = schema.safeParse(input, { error: (issue) => describe(issue as unknown as Issue) });
  if (result.success) return { value: result.data };
  return { violations: distinct(result.error.issues.flatMap(toViolations)) };
}

/**
 * Each violation once: a map's keys are named by the map, not echoed (toViolations), so two keys
 * breaking one rule would otherwise read as the same line twice.
 */
function distinct(violations: Violation[]): Violation[] {
  const seen = new Set<string>();
  return violations.filter(({ field, message }) => {
    const key = `${field}\0${message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function toViolations(issue: Issue): Violation[] {
  const field = pathOf(issue.path);
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => {
      const name = field ? `${field}.${key}` : key;
      return { field: name, message: `${name} is not a known field` };
    });
  }
  if (issue.code === "invalid_key") {
    // A record's key: named by its map, not echoed (it is the client's own, of any length).
    const map = pathOf(issue.path.slice(0, -1)) || "The request body";
    const rules = issue.issues.map((inner) => inner.message);
    return rules.map((rule) => ({ field: map, message: `${map} keys ${rule}` }));
  }
  const subject = field || "The request body";
  return [{ field, message: `${subject} ${issue.message}` }];
}

/** JSON path of an issue: a.b[2].c */
export function pathOf(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/**
 * Default wording for rules whose schema gives no message of its own: a missing field "is
 * required", whatever its type; a present one says what it must be.
 */
function describe(issue: Issue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined ? "is required" : `must be ${article(issue.expected)}`;
    case "invalid_value":
      if (issue.input === undefined) return "is required";
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of: ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "too_big":
      return issue.origin === "array"
        ? `must have at most ${entries(issue.maximum)}`
        : `must be at most ${issue.maximum}`;
    case "too_small":
      return issue.origin === "array"
        ? `must have at least ${entries(issue.minimum)}`
        : `must be at least ${issue.minimum}`;
    case "invalid_format":
      return "has an invalid format";
    default:
      return undefined;
  }
}

function entries(count: number | bigint): string {
  return `${count} ${count === 1 || count === 1n ? "entry" : "entries"}`;
}

function article(expected: string): string {
  if (expected === "int") return "an integer";
  // A record is a JSON object to the client, whatever zod calls its schema.
  if (expected === "object" || expected === "record") return "an object";
  if (expected === "array") return "an array";
  return `a ${expected}`;
}

/** Parses `input` or throws the error `failure` makes of the violations. */
export function parseOrThrow<T>(
  schema: z.ZodType<T>,
  input: unknown,
  failure: (violations: Violation[]) => Error,
): T {
  const result = check(schema, input);
  if ("value" in result) return result.value;
  throw failure(result.violations);
}
