import type { JsonObject } from "@bufbuild/protobuf";
import { z } from "zod";
import { invalidRequest, type Violation } from "#daemon/errors.js";
import {
  ACCEPT_TYPES,
  COLLECTED_VIA,
  type ConsentStateField,
} from "#daemon/subjects/state-vocabulary.js";
import {
  consentServices,
  EVEN_WITH_FAILED_ENTRIES,
  integer,
  isIsoDateTime,
  isoDateTime,
  isoInstant,
  LANGUAGE_CODE_MAX,
  label,
  MAX_REVISION,
  noRepeats,
  text,
  usOptOutPurposes,
  uuid,
} from "#daemon/validation/rules.js";
import { check, parseOrThrow } from "#daemon/validation/violations.js";

/** spec 8: request bodies of the subject endpoints. */
export const SUBJECT_BODY_LIMIT = 20 * 1024;

/** spec 2.2: the subject reference sent in every consent-state body. */
const subjectReference = {
  bannerId: uuid,
  namespace: text(1, 64).optional(),
  subjectId: text(1, 256).refine((value) => !value.includes("@"), "must not contain @"),
};

/**
 * spec 2.4: the canonical consent state, schemaVersion 2. Unknown fields are a 400 (decisions §4);
 * the fields are exactly CONSENT_STATE_FIELDS, which the banner runtime checks too. Its names
 * and codes are labels, without control characters, as the same values in a log post are
 * (decisions §5: `languageCode` "as in spec 2.4").
 * The order of the two timestamps is checked apart (timestampOrder).
 */
const consentState = z.strictObject({
  schemaVersion: z.literal(2),
  categories: z
    .array(label(1, 100))
    .max(50, "must have at most 50 entries")
    .superRefine(noRepeats("category"), EVEN_WITH_FAILED_ENTRIES),
  revision: integer(0, MAX_REVISION),
  acceptType: z.enum(ACCEPT_TYPES),
  consentId: uuid,
  consentTimestamp: isoDateTime,
  lastConsentTimestamp: isoDateTime,
  languageCode: label(1, LANGUAGE_CODE_MAX),
  services: consentServices.optional(),
  jurisdictions: z
    .array(label(1, 64))
    .max(50)
    .superRefine(noRepeats("jurisdiction"), EVEN_WITH_FAILED_ENTRIES)
    .optional(),
  gpcRespected: z.boolean().optional(),
  usOptOutChoices: z.strictObject(usOptOutPurposes).optional(),
  isPending: z.boolean().optional(),
  isDefaultState: z.boolean().optional(),
  collectedVia: z.enum(COLLECTED_VIA).optional(),
} satisfies Record<ConsentStateField, z.ZodType>);

/**
 * spec 2.4: lastConsentTimestamp must not precede consentTimestamp. Checked outside the schema so
 * it is listed beside the violations of every other field (spec 7; a zod refinement of the whole
 * object is skipped once any field fails), and only between two valid timestamps.
 */
function timestampOrder(body: unknown): Violation[] {
  const state = (body as { consentState?: Record<string, unknown> } | null)?.consentState;
  const [first, last] = [state?.consentTimestamp, state?.lastConsentTimestamp];
  if (typeof first !== "string" || typeof last !== "string") return [];
  if (!isIsoDateTime(first) || !isIsoDateTime(last)) return [];
  // Every fractional digit counts: .0001 after a whole second is later (Date.parse drops it).
  if (isoInstant(last) >= isoInstant(first)) return [];
  const field = "consentState.lastConsentTimestamp";
  return [{ field, message: `${field} must not precede consentState.consentTimestamp` }];
}

/**
 * decisions §4: an explicit expiry lies in the future. Checked outside the schema, as the
 * timestamp order is, so it is listed beside every other field that fails.
 */
function pastExpiry(body: unknown, now: Date): Violation[] {
  const expiresAt = (body as { expiresAt?: unknown } | null)?.expiresAt;
  if (typeof expiresAt !== "string" || !isIsoDateTime(expiresAt)) return [];
  if (new Date(expiresAt) > now) return [];
  return [{ field: "expiresAt", message: "expiresAt must be in the future" }];
}

const referenceBody = z.object(subjectReference);

const putBody = z.object({
  ...subjectReference,
  baseVersion: integer(0, 2_147_483_646),
  consentState,
  expiresAt: isoDateTime.optional(),
  protocolVersion: z.literal(1).optional(),
});

export interface SubjectReference {
  bannerId: string;
  namespace: string;
  subjectId: string;
}

export interface StateWrite extends SubjectReference {
  baseVersion: number;
  consentState: JsonObject;
  expiresAt?: string;
  protocolVersion: number;
}

/** Validates a resolve or delete body (spec 2.2); namespace defaults to "default". */
export function readSubjectReference(body: unknown): SubjectReference {
  const value = parseOrThrow(referenceBody, body, (violations) => invalidRequest(violations));
  return { ...value, namespace: value.namespace ?? "default" };
}

/**
 * Validates a PUT state body (spec 2.4, 4.6) written at `now`, with one message per violated
 * field, all in one answer.
 */
export function readStateWrite(body: unknown, now: Date): StateWrite {
  const result = check(putBody, body);
  const across = [...timestampOrder(body), ...pastExpiry(body, now)];
  if ("violations" in result || across.length > 0) {
    throw invalidRequest([...("violations" in result ? result.violations : []), ...across]);
  }
  const { value } = result;
  return {
    ...value,
    namespace: value.namespace ?? "default",
    consentState: value.consentState as JsonObject,
    protocolVersion: value.protocolVersion ?? 1,
  };
}

/**
 * decisions §4: default expiry 13 months after the write, an explicit one (in the future, as
 * readStateWrite checked) capped at 25 months.
 */
export function recordExpiry(requested: string | undefined, now: Date): Date {
  const cap = addMonths(now, 25);
  if (requested === undefined) return addMonths(now, 13);
  const at = new Date(requested);
  return at > cap ? cap : at;
}

/**
 * The same day and time `months` later, or the last day of that month when it is shorter (Jan 31
 * + 13 months is the end of February), so a record never outlives its months. Date's own
 * setUTCMonth would carry the missing days into the month after.
 */
export function addMonths(date: Date, months: number): Date {
  const out = new Date(date);
  const day = out.getUTCDate();
  out.setUTCDate(1);
  out.setUTCMonth(out.getUTCMonth() + months);
  const lastDay = new Date(Date.UTC(out.getUTCFullYear(), out.getUTCMonth() + 1, 0)).getUTCDate();
  out.setUTCDate(Math.min(day, lastDay));
  return out;
}
