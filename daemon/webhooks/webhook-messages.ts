import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type DeliveryRecord,
  type WebhookEndpointRecord,
  withoutExpiredPreviousSecret,
} from "#daemon/webhooks/webhook-store.js";
import {
  type Delivery,
  DeliverySchema,
  type Webhook,
  WebhookSchema,
} from "#gen/consent/v1/webhook_pb.js";

const time = (date: Date | undefined) => (date ? timestampFromDate(date) : undefined);

/**
 * An endpoint as the Webhook message at `now`; `secret` only in a create or rotation response.
 * A previous secret whose grace period has ended is not shown (it no longer signs), though the
 * stored record keeps it until its next write.
 */
export function webhookMessage(stored: WebhookEndpointRecord, now: Date, secret = ""): Webhook {
  const record = withoutExpiredPreviousSecret(stored, now);
  return create(WebhookSchema, {
    id: record.id,
    url: record.url,
    eventTypes: record.eventTypes,
    bannerIds: record.bannerIds,
    enabled: record.enabled,
    description: record.description,
    createdAt: time(record.createdAt),
    updatedAt: time(record.updatedAt),
    secret,
    disabledReason: record.disabledReason ?? "",
    disabledAt: time(record.disabledAt),
    failingSince: time(record.failingSince),
    previousSecretExpiresAt: time(record.previousSecretExpiresAt),
  });
}

/** A delivery as the Delivery message (the payload itself stays in the store). */
export function deliveryMessage(record: DeliveryRecord): Delivery {
  return create(DeliverySchema, {
    id: record.id,
    webhookId: record.webhookId,
    eventId: record.eventId,
    eventType: record.eventType,
    bannerId: record.publicId,
    status: record.status,
    attempts: record.attempts,
    createdAt: time(record.createdAt),
    nextAttemptAt: record.status === "pending" ? time(record.nextAttemptAt) : undefined,
    lastAttemptAt: time(record.lastAttemptAt),
    lastStatusCode: record.lastStatusCode ?? 0,
    lastError: record.lastError ?? "",
    lastResponseExcerpt: record.lastResponseExcerpt ?? "",
    succeededAt: time(record.succeededAt),
  });
}
