import { isExplicitChoice } from "#daemon/consent-log/consent-log-rules.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import type { Store } from "#daemon/store/store.js";
import {
  type DeliveryRecord,
  deliveryId,
  eventIdOf,
  type WebhookEndpointRecord,
} from "#daemon/webhooks/webhook-store.js";

/** Dispatchers of this process waiting on each store, woken when an event is appended. */
const listeners = new WeakMap<Store, Set<() => void>>();

/**
 * Appends a consent log row with, for an explicit choice, its `consent.given` event in the same
 * atomic write (spec 1.4, 3.3 and 6: default-state rows emit nothing), then wakes this process's
 * dispatcher so delivery starts at once instead of at the next poll. Delivery itself never runs
 * here: the visitor's request returns as soon as the write is durable.
 */
export async function appendConsentLog(store: Store, record: ConsentLogRecord): Promise<void> {
  const explicit = isExplicitChoice(record.method);
  await store.consentLog.append(record, explicit ? { event: "consent.given" } : {});
  if (explicit) for (const wake of listeners.get(store) ?? []) wake();
}

/** Calls `wake` after every event appended through appendConsentLog on `store`; returns an unsubscribe. */
export function onOutboxEvent(store: Store, wake: () => void): () => void {
  let set = listeners.get(store);
  if (!set) {
    set = new Set();
    listeners.set(store, set);
  }
  set.add(wake);
  return () => set.delete(wake);
}

/** spec 6 and decisions §8: the body of a `consent.given` event; no personal data. */
export function consentGivenBody(row: ConsentLogRecord): string {
  return JSON.stringify({
    type: "consent.given",
    timestamp: row.receivedAt.toISOString(),
    data: {
      consentLogId: row.id,
      bannerId: row.publicId,
      consentId: row.consentId,
      method: row.method,
      preferences: row.preferences,
      revision: row.revision ?? null,
      languageCode: row.languageCode ?? null,
      country: row.country ?? null,
      region: row.region ?? null,
      matchedRuleId: row.matchedRuleId ?? null,
      gpc: row.gpc ?? null,
      purposeChoices: row.purposeChoices ?? null,
      services: row.services ?? null,
      occurredAt: row.occurredAt.toISOString(),
    },
  });
}

/**
 * spec 6: what a `consent.given` event is to deliver, one delivery per enabled endpoint of the
 * team subscribed to the event and its banner, due at once; the dispatcher (dispatcher.ts) fans
 * them out, leasing those it attempts at once.
 */
export function consentGivenDeliveries(
  row: ConsentLogRecord,
  endpoints: WebhookEndpointRecord[],
): DeliveryRecord[] {
  const eventId = eventIdOf(row.id);
  const payload = consentGivenBody(row);
  return endpoints
    .filter(
      (endpoint) =>
        endpoint.enabled &&
        endpoint.eventTypes.includes("consent.given") &&
        (endpoint.bannerIds.length === 0 || endpoint.bannerIds.includes(row.publicId)),
    )
    .map((endpoint) => ({
      id: deliveryId(eventId, endpoint.id),
      teamId: row.teamId,
      webhookId: endpoint.id,
      eventId,
      eventType: "consent.given",
      publicId: row.publicId,
      payload,
      status: "pending",
      attempts: 0,
      createdAt: row.receivedAt,
      nextAttemptAt: row.receivedAt,
    }));
}
