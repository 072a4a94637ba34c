import { z } from "zod";
import { SCOPES } from "#daemon/auth/scopes.js";
import { invalidRequest } from "#daemon/errors.js";
import { PLANS } from "#daemon/teams/team-store.js";
import { displayName, type ProtoTimestamp, protoTimestamp } from "#daemon/validation/rules.js";
import { parseOrThrow } from "#daemon/validation/violations.js";

const plan = z.enum(PLANS, { error: `must be one of: ${PLANS.join(", ")}` });

const teamCreation = z.object({
  name: displayName(255),
  plan,
});
const keyCreation = z.object({
  teamId: z.string().min(1, "is required"),
  environment: z.enum(["live", "test"], { error: "must be live or test" }),
  scopes: z
    .array(z.enum(SCOPES, { error: `must be one of: ${SCOPES.join(", ")}` }))
    .min(1, "must name at least one scope"),
  name: displayName(255, { optional: true }),
});

const fail = (violations: Parameters<typeof invalidRequest>[0]) => invalidRequest(violations);

export function readTeamCreation(input: { name: string; plan: string }) {
  return parseOrThrow(teamCreation, input, fail);
}

export function readPlan(value: string) {
  return parseOrThrow(z.object({ plan }), { plan: value }, fail).plan;
}

/**
 * CreateApiKey's fields, every failing one named in one answer (docs/behaviour.md): the optional
 * expiry a time within google.protobuf.Timestamp's range and after `now`.
 */
export function readKeyCreation(
  input: {
    teamId: string;
    environment: string;
    scopes: string[];
    name: string;
    expiresAt?: ProtoTimestamp;
  },
  now: Date,
) {
  const schema = keyCreation.extend({
    expiresAt: protoTimestamp.refine((at) => at > now, "must be in the future").optional(),
  });
  const value = parseOrThrow(schema, input, fail);
  return { ...value, scopes: [...new Set(value.scopes)], expiresAt: value.expiresAt ?? null };
}

/** A dashboard session's lifetime: one minute to 30 days (consentctl checks it too). */
export const SESSION_TTL_SECONDS = { min: 60, max: 30 * 86400 } as const;
/** How long a rotated key keeps working: none to 90 days (consentctl checks it too). */
export const KEY_GRACE_SECONDS = { min: 0, max: 90 * 86400 } as const;

/** decisions §2: dashboard sessions last 12 hours unless the operator says otherwise (at most 30 days). */
export function sessionLifetimeSeconds(requested: number | undefined): number {
  if (requested === undefined) return 12 * 3600;
  if (
    !Number.isInteger(requested) ||
    requested < SESSION_TTL_SECONDS.min ||
    requested > SESSION_TTL_SECONDS.max
  ) {
    throw invalidRequest([
      { field: "ttlSeconds", message: "ttlSeconds must be from 60 to 2592000 (30 days)" },
    ]);
  }
  return requested;
}
