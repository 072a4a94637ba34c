import { z } from "zod";
import { invalidRequest, type Violation } from "#daemon/errors.js";
import {
  IF_VALID_SO_FAR,
  integer,
  label,
  type ProtoTimestamp,
  protoTimestamp,
  text,
  uuid,
} from "#daemon/validation/rules.js";
import { parseOrThrow } from "#daemon/validation/violations.js";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { type DeliveryStatus, EVENT_TYPES } from "#daemon/webhooks/webhook-store.js";

/** Webhook bodies are small: a URL, a few lists and a description. */
export const WEBHOOK_BODY_LIMIT = 20 * 1024;
/** Default grace period of a rotated secret: one day. */
export const DEFAULT_GRACE_SECONDS = 86_400;
export const MAX_GRACE_SECONDS = 7 * 86_400;
/**
 * Endpoints one team may have (docs/webhooks.md): every event fans out to each of them, so the
 * cap bounds one event's work. Creating one more is refused with 409 failed_precondition.
 * Raise it freely; lowering it needs the MongoDB `slot`s at or above the new value renumbered
 * first, or racing creates could pass the new maximum (mongo-writes.ts freeSlot).
 */
export const MAX_WEBHOOKS_PER_TEAM = 50;
const DELIVERY_STATUSES: readonly DeliveryStatus[] = ["pending", "succeeded", "failed"];

/** docs/webhooks.md: a `url` is at most this long, as sent and as stored. */
const MAX_URL_CHARS = 2048;

const url = text(1, MAX_URL_CHARS)
  .refine((value) => URL.canParse(value), "must be an absolute URL")
  // The URL is stored (and shown, and sent) as the WHATWG parser writes it: a non-ASCII character
  // of a path or query percent-encoded takes up to 12 characters, a host name's punycode more, so
  // 2,048 characters sent could be stored as many times that. The bound holds for the stored form.
  .refine((value) => new URL(value).href.length <= MAX_URL_CHARS, {
    message: `must be at most ${MAX_URL_CHARS} characters once written as a URL (non-ASCII characters percent-encoded, e.g. é as %C3%A9, and a host name in punycode)`,
    ...IF_VALID_SO_FAR,
  })
  // Credentials in the URL would be stored and shown to every key that may read webhooks.
  // Runs only once the URL parses (IF_VALID_SO_FAR).
  .refine((value) => !hasUserinfo(new URL(value)), {
    message:
      "must not contain a user name or password (user:password@); receivers authenticate " +
      "deliveries by their webhook-signature header (Standard Webhooks), not by the URL",
    ...IF_VALID_SO_FAR,
  });
// A repeated type is taken once (as repeated bannerIds are), so the bound is on the list sent.
const eventTypes = z.array(z.enum(EVENT_TYPES)).min(1).max(20);
const bannerIds = z.array(uuid).max(100);
// Read in a terminal (`consentctl webhooks list`), as names are: no control character.
const description = label(0, 500);
/** Fields of the Webhook shape a client may send back unchanged in a PATCH; they are ignored. */
const readOnly = z.unknown().optional();

/** decisions §8: the create body. */
const createBody = z.strictObject({
  url,
  eventTypes: eventTypes.optional(),
  bannerIds: bannerIds.optional(),
  description: description.optional(),
});

/** The PATCH body: every field optional; rotateSecret makes a new secret. */
const updateBody = z.strictObject({
  url: url.optional(),
  eventTypes: eventTypes.optional(),
  bannerIds: bannerIds.optional(),
  description: description.optional(),
  enabled: z.boolean().optional(),
  rotateSecret: z.boolean().optional(),
  secretGracePeriodSeconds: integer(0, MAX_GRACE_SECONDS).optional(),
  id: readOnly,
  createdAt: readOnly,
  updatedAt: readOnly,
  disabledReason: readOnly,
  disabledAt: readOnly,
  failingSince: readOnly,
  previousSecretExpiresAt: readOnly,
});

export interface WebhookCreation {
  url: string;
  eventTypes: string[];
  bannerIds: string[];
  description: string;
}

export type WebhookUpdate = Partial<WebhookCreation> & {
  enabled?: boolean;
  rotateSecret?: boolean;
  secretGracePeriodSeconds?: number;
};

/**
 * Whether the URL carries userinfo. The WHATWG parser drops an empty one (`https://@host/`), which
 * then stores nothing, so only a user name or a password counts.
 */
function hasUserinfo(value: URL): boolean {
  return value.username !== "" || value.password !== "";
}

/** The URL's refusal by the SSRF guard, as a violation of the `url` field. */
function checkUrl(value: string | undefined, guard: AddressGuard): void {
  if (value === undefined) return;
  const refusal = guard.checkUrl(new URL(value));
  if (refusal) throw invalidRequest([{ field: "url", message: `url is not allowed: ${refusal}` }]);
}

const lowerCase = (ids: string[] | undefined) =>
  ids && [...new Set(ids.map((id) => id.toLowerCase()))];

export function readWebhookCreation(body: unknown, guard: AddressGuard): WebhookCreation {
  const value = parseOrThrow(createBody, body, (details: Violation[]) => invalidRequest(details));
  checkUrl(value.url, guard);
  return {
    url: new URL(value.url).toString(),
    eventTypes: value.eventTypes ? [...new Set(value.eventTypes)] : ["consent.given"],
    bannerIds: lowerCase(value.bannerIds) ?? [],
    description: value.description ?? "",
  };
}

export function readWebhookUpdate(body: unknown, guard: AddressGuard): WebhookUpdate {
  const value = parseOrThrow(updateBody, body, (details: Violation[]) => invalidRequest(details));
  checkUrl(value.url, guard);
  if (value.secretGracePeriodSeconds !== undefined && value.rotateSecret !== true) {
    throw invalidRequest([
      {
        field: "secretGracePeriodSeconds",
        message: "secretGracePeriodSeconds needs rotateSecret: true",
      },
    ]);
  }
  return {
    url: value.url === undefined ? undefined : new URL(value.url).toString(),
    eventTypes: value.eventTypes && [...new Set(value.eventTypes)],
    bannerIds: lowerCase(value.bannerIds),
    description: value.description,
    enabled: value.enabled,
    rotateSecret: value.rotateSecret,
    secretGracePeriodSeconds: value.secretGracePeriodSeconds,
  };
}

/** Paging and the status filter of ListDeliveries. */
export function readDeliveryPaging(pageSize: number, pageToken: string, status: string) {
  const violations: Violation[] = [];
  if (pageSize < 0 || pageSize > 1_000) {
    violations.push({ field: "pageSize", message: "pageSize must be from 1 to 1000" });
  }
  if (pageToken && !/^dlv_[0-9a-f]{32}_[0-9a-f]{32}$/.test(pageToken)) {
    violations.push({ field: "pageToken", message: "pageToken is not a token this service made" });
  }
  if (status && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
    violations.push({
      field: "status",
      message: `status must be one of: ${DELIVERY_STATUSES.join(", ")}`,
    });
  }
  if (violations.length > 0) throw invalidRequest(violations);
  return {
    limit: pageSize || 100,
    beforeId: pageToken || undefined,
    status: (status || undefined) as DeliveryStatus | undefined,
  };
}

/** ReplayDeliveries' `since`: a time within google.protobuf.Timestamp's range (protoTimestamp). */
export function readReplaySince(since: ProtoTimestamp): Date {
  return parseOrThrow(z.object({ since: protoTimestamp }), { since }, invalidRequest).since;
}
