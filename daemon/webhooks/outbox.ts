import { isExplicitChoice } from "#daemon/consent-log/consent-log-rules.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import type { Store } from "#daemon/store/store.js";

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
      occurredAt: row.occurredAt.toISOString(),
    },
  });
}
