import { compareKeys, type Database } from "lmdb";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { PREFIX_END, prefixRange } from "#daemon/store/lmdb-keys.js";
import { DuplicateKeyError } from "#daemon/store/store.js";
import {
  type ClockHorizons,
  clockHorizons,
  type DeliveryRecord,
  nextAttemptAtClaim,
  RoomCounter,
  type WebhookEndpointRecord,
  type WebhookStore,
  withAttempt,
} from "#daemon/webhooks/webhook-store.js";

/** A pending `consent.given` event: written by the consent log's append in the same transaction. */
export interface OutboxEntry {
  teamId: string;
  /** When the event may next be claimed: its append, then the end of each lease. */
  dueAtMs: number;
  leaseOwner?: string;
}

/** `[teamId, createdAt in ms, id]`: a forward scan lists a team's endpoints oldest first. */
type TeamEndpointKey = [teamId: string, createdAtMs: number, id: string];
/** `[webhookId, deliveryId]`: a reverse scan lists an endpoint's deliveries newest first. */
type EndpointDeliveryKey = [webhookId: string, id: string];
/** `[due in ms, deliveryId]` of every pending delivery: the later of nextAttemptAt and leaseUntil. */
type DueKey = [dueAtMs: number, id: string];
/** `[leaseUntil in ms, deliveryId]` of every leased pending delivery, for ClockHorizons. */
type LeaseKey = [leaseUntilMs: number, id: string];

export interface LmdbWebhookDatabases {
  webhookEndpoints: Database<WebhookEndpointRecord, string>;
  webhookEndpointIdsByTeam: Database<string, TeamEndpointKey>;
  /** consentLogId → pending event; shared with the consent log store, whose append fills it. */
  webhookOutbox: Database<OutboxEntry, string>;
  /** The consent log rows, `[teamId, id]` → row, read to build events. */
  consentLog: Database<ConsentLogRecord, [string, string]>;
  webhookDeliveries: Database<DeliveryRecord, string>;
  webhookDeliveryIdsByEndpoint: Database<true, EndpointDeliveryKey>;
  webhookDeliveriesDue: Database<true, DueKey>;
  webhookDeliveryLeases: Database<true, LeaseKey>;
}

/** Events of teams without endpoints one claim retires at most (bounding its transaction). */
const MAX_RETIRED = 1_000;
/** Due deliveries a claim looks past at most for endpoints it was asked to skip. */
const SKIPPED_SCAN = 1_000;

/** When a pending delivery may next be claimed; null for a delivery that is not pending. */
function dueKey(delivery: DeliveryRecord): DueKey | null {
  if (delivery.status !== "pending") return null;
  const next = delivery.nextAttemptAt?.getTime() ?? 0;
  const lease = delivery.leaseUntil?.getTime() ?? 0;
  return [Math.max(next, lease), delivery.id];
}

/** Until when a pending delivery is leased; null for one that is not pending or not leased. */
function leaseKey(delivery: DeliveryRecord): LeaseKey | null {
  if (delivery.status !== "pending" || !delivery.leaseUntil) return null;
  return [delivery.leaseUntil.getTime(), delivery.id];
}

/** The same key, or both absent. */
function sameKey(a: DueKey | LeaseKey | null, b: DueKey | LeaseKey | null): boolean {
  return a === b || (a !== null && b !== null && compareKeys(a, b) === 0);
}

/** The `meta` key marking a store whose lease index holds every leased pending delivery. */
export const LEASE_INDEX_MARK = "webhook-delivery-leases";

/**
 * Indexes, once, the leases of the pending deliveries a store holds from a version that kept no
 * lease index: without their entries a lease such a version set by a clock ahead of this one
 * would be held for the size of the step (WebhookStore, "Clock steps"). Pending deliveries are
 * those of the due index; one write transaction, so daemons starting together index once.
 */
export async function indexEarlierLeases(
  dbs: Pick<
    LmdbWebhookDatabases,
    "webhookDeliveries" | "webhookDeliveriesDue" | "webhookDeliveryLeases"
  >,
  meta: Database<unknown, string>,
): Promise<void> {
  if (meta.get(LEASE_INDEX_MARK) === true) return;
  await meta.transaction(() => {
    if (meta.get(LEASE_INDEX_MARK) === true) return;
    for (const key of dbs.webhookDeliveriesDue.getKeys({})) {
      const delivery = dbs.webhookDeliveries.get(key[1]);
      const leased = delivery && leaseKey(delivery);
      if (leased) dbs.webhookDeliveryLeases.putSync(leased, true);
    }
    meta.putSync(LEASE_INDEX_MARK, true);
  });
}

/**
 * WebhookStore over LMDB. Every claim, fan-out and completion is one write transaction, which LMDB
 * serialises across processes: two daemons on one data directory never claim the same item.
 */
export function createLmdbWebhookStore(dbs: LmdbWebhookDatabases): WebhookStore {
  const { webhookEndpoints: endpoints, webhookDeliveries: deliveries } = dbs;
  const { webhookDeliveriesDue: due, webhookOutbox: outbox, webhookDeliveryLeases: leases } = dbs;
  /** Where the last claim's second window stopped in a backlog of full endpoints' deliveries. */
  let beyond: DueKey | undefined;

  /**
   * The indexes kept beside the deliveries: each with a delivery's key in it, and the horizon
   * beyond which a key was set by a clock ahead of the claimant's (WebhookStore, "Clock steps").
   */
  const deliveryIndexes = [
    { index: leases, keyOf: leaseKey, horizon: (h: ClockHorizons) => h.leases },
    { index: due, keyOf: dueKey, horizon: (h: ClockHorizons) => h.retries },
  ] as const;

  /** A delivery's entries in the indexes: while pending its due key, while leased its lease key. */
  function indexEntriesOf(delivery: DeliveryRecord) {
    return deliveryIndexes.flatMap(({ index, keyOf }) => {
      const key = keyOf(delivery);
      return key ? [{ index, key }] : [];
    });
  }

  /** Writes a delivery and moves its index entries; inside a write transaction. */
  function putDelivery(next: DeliveryRecord, previous: DeliveryRecord | undefined): void {
    for (const { index, keyOf } of deliveryIndexes) {
      const before = previous ? keyOf(previous) : null;
      const after = keyOf(next);
      if (before && !sameKey(before, after)) index.removeSync(before);
      if (after) index.putSync(after, true);
    }
    deliveries.putSync(next.id, next);
  }

  /** Whether an outbox entry is due at `now`: its time passed, or set ahead of the clock. */
  function isDueEvent(entry: OutboxEntry, now: Date, horizons: ClockHorizons): boolean {
    return entry.dueAtMs <= now.getTime() || entry.dueAtMs > horizons.leases.getTime();
  }

  function hasDueEvent(now: Date, horizons: ClockHorizons): boolean {
    for (const { value } of outbox.getRange({})) if (isDueEvent(value, now, horizons)) return true;
    return false;
  }

  /** Whether a team has any endpoint, each team looked up once per call. */
  function teamsWithEndpoints(): (teamId: string) => boolean {
    const known = new Map<string, boolean>();
    return (teamId) => {
      let found = known.get(teamId);
      if (found === undefined) {
        found = false;
        const range = { ...prefixRange(teamId, "ascending"), limit: 1 };
        for (const _ of dbs.webhookEndpointIdsByTeam.getKeys(range)) found = true;
        known.set(teamId, found);
      }
      return found;
    };
  }

  function hasDueDelivery(now: Date, horizons: ClockHorizons): boolean {
    for (const _ of due.getKeys({ end: [now.getTime(), PREFIX_END], limit: 1 })) return true;
    return aheadOfClock(horizons, 1).length > 0;
  }

  /**
   * Up to `limit` keys of each index beyond its horizon (WebhookStore, "Clock steps"): leases
   * ending, or deliveries falling due, further ahead than the claimant's clock allows.
   */
  function aheadOfClock(horizons: ClockHorizons, limit: number) {
    return deliveryIndexes.flatMap(({ index, keyOf, horizon }) =>
      Array.from(
        index.getKeys({ start: [horizon(horizons).getTime(), PREFIX_END], limit }),
        (key) => ({ index, key, keyOf }),
      ),
    );
  }

  function removeDeliveriesOf(webhookId: string): void {
    const keys = Array.from(
      dbs.webhookDeliveryIdsByEndpoint.getKeys(prefixRange(webhookId, "ascending")),
    );
    for (const key of keys) {
      const delivery = deliveries.get(key[1]);
      if (delivery) for (const entry of indexEntriesOf(delivery)) entry.index.removeSync(entry.key);
      deliveries.removeSync(key[1]);
      dbs.webhookDeliveryIdsByEndpoint.removeSync(key);
    }
  }

  /**
   * Port: no delivery outlives its endpoint. A fan-out that read the endpoints before one was
   * removed may commit after the removal; its deliveries to that endpoint are removed again here
   * (the removal took those stored before it) and are not handed to the caller.
   */
  async function withoutRemovedEndpoints(stored: DeliveryRecord[]): Promise<DeliveryRecord[]> {
    const removed = new Set(
      stored.map((delivery) => delivery.webhookId).filter((id) => !endpoints.doesExist(id)),
    );
    if (removed.size === 0) return stored;
    await endpoints.transaction(() => {
      for (const id of removed) if (!endpoints.doesExist(id)) removeDeliveriesOf(id);
    });
    return stored.filter((delivery) => !removed.has(delivery.webhookId));
  }

  return {
    async insertEndpoint(endpoint, maxPerTeam) {
      // The count and the insert in one write transaction, which LMDB serialises across
      // processes: racing inserts of one team see each other, and never pass the maximum.
      return endpoints.transaction(() => {
        if (maxPerTeam !== undefined) {
          const range = { ...prefixRange(endpoint.teamId, "ascending"), limit: maxPerTeam };
          if (dbs.webhookEndpointIdsByTeam.getKeysCount(range) >= maxPerTeam) return false;
        }
        if (endpoints.doesExist(endpoint.id)) throw new DuplicateKeyError("webhook id");
        endpoints.putSync(endpoint.id, endpoint);
        dbs.webhookEndpointIdsByTeam.putSync(
          [endpoint.teamId, endpoint.createdAt.getTime(), endpoint.id],
          endpoint.id,
        );
        return true;
      });
    },
    async getEndpoint(teamId, id) {
      const endpoint = endpoints.get(id);
      return endpoint?.teamId === teamId ? endpoint : null;
    },
    async listEndpoints(teamId) {
      const ids = dbs.webhookEndpointIdsByTeam.getRange(prefixRange(teamId, "ascending"));
      return Array.from(ids, ({ value }) => endpoints.get(value)).filter((e) => e !== undefined);
    },
    async endpointsAfter(afterId, limit) {
      if (limit <= 0) return [];
      // The range starts at afterId itself, which a page after it leaves out.
      const range = endpoints.getRange({ start: afterId ?? undefined, limit: limit + 1 });
      const page = Array.from(
        range.filter(({ key }) => key !== afterId),
        ({ value }) => value,
      );
      return page.slice(0, limit);
    },
    async replaceEndpoint(next, expectedVersion) {
      if (next.version !== expectedVersion + 1) {
        throw new RangeError(`webhook version ${next.version} does not follow ${expectedVersion}`);
      }
      return endpoints.transaction(() => {
        const stored = endpoints.get(next.id);
        if (stored?.version !== expectedVersion) return false;
        if (
          stored.teamId !== next.teamId ||
          stored.createdAt.getTime() !== next.createdAt.getTime()
        ) {
          throw new RangeError("replace cannot change a webhook's teamId or createdAt");
        }
        endpoints.putSync(next.id, next);
        return true;
      });
    },
    async deleteEndpoint(teamId, id) {
      return endpoints.transaction(() => {
        const stored = endpoints.get(id);
        if (stored?.teamId !== teamId) return false;
        endpoints.removeSync(id);
        dbs.webhookEndpointIdsByTeam.removeSync([teamId, stored.createdAt.getTime(), id]);
        removeDeliveriesOf(id);
        return true;
      });
    },

    async claimEvents(lease, now, limit) {
      if (limit <= 0) return [];
      // A read first: with nothing due, no write transaction (which queues behind every append).
      const horizons = clockHorizons(lease, now);
      if (!hasDueEvent(now, horizons)) return [];
      return outbox.transaction(() => {
        const claimed: ConsentLogRecord[] = [];
        const subscribes = teamsWithEndpoints();
        let retired = 0;
        // Keys are UUIDv7 consentLogIds: a forward scan meets the oldest events first.
        for (const { key, value } of outbox.getRange({})) {
          if (!isDueEvent(value, now, horizons)) continue;
          const row = dbs.consentLog.get([value.teamId, key]);
          // Port: an event of a team without endpoints fans out to nothing, so it is retired here.
          if (!row || (!subscribes(value.teamId) && retired++ < MAX_RETIRED)) {
            outbox.removeSync(key);
            continue;
          }
          outbox.putSync(key, {
            ...value,
            dueAtMs: lease.until.getTime(),
            leaseOwner: lease.owner,
          });
          claimed.push(row);
          if (claimed.length >= limit) break;
        }
        return claimed;
      });
    },
    async fanOut(consentLogId, created) {
      // Conditional write blocks queued in one event turn, so lmdb commits them and the outbox
      // removal in one transaction, run whole on its write thread: a delivery already stored is
      // left alone, and the event is retired with its deliveries or not at all.
      const stored = created.map((delivery) =>
        deliveries.ifNoExists(delivery.id, () => {
          for (const { index, key } of indexEntriesOf(delivery)) index.put(key, true);
          deliveries.put(delivery.id, delivery);
          dbs.webhookDeliveryIdsByEndpoint.put([delivery.webhookId, delivery.id], true);
        }),
      );
      const [, ...written] = await Promise.all([outbox.remove(consentLogId), ...stored]);
      return withoutRemovedEndpoints(created.filter((_, index) => written[index]));
    },

    async claimDeliveries(lease, now, limit, room) {
      if (limit <= 0) return [];
      // A read first: with nothing due, no write transaction.
      const horizons = clockHorizons(lease, now);
      if (!hasDueDelivery(now, horizons)) return [];
      return deliveries.transaction(() => {
        const claimed: DeliveryRecord[] = [];
        const taken = new RoomCounter(room);
        // Full endpoints' and teams' deliveries are looked past, within a bound on the scan.
        const scan = limit + (room ? SKIPPED_SCAN : 0);
        const end = [now.getTime(), PREFIX_END];
        const claim = (stored: DeliveryRecord) => {
          taken.take(stored);
          const next = {
            ...stored,
            nextAttemptAt: nextAttemptAtClaim(stored, now),
            leaseOwner: lease.owner,
            leaseUntil: lease.until,
          };
          putDelivery(next, stored);
          claimed.push(next);
        };
        // First what was leased or scheduled ahead of this clock: overdue by the size of a step.
        for (const { index, key, keyOf } of aheadOfClock(horizons, scan)) {
          if (claimed.length >= limit) return claimed;
          const stored = deliveries.get(key[1]);
          if (!stored || !sameKey(keyOf(stored), key)) {
            // An entry its delivery no longer has: met in both indexes and claimed from the
            // first, or left by a release that kept no lease index.
            index.removeSync(key);
            continue;
          }
          if (taken.fits(stored)) claim(stored);
        }
        /**
         * Claims what fits among `keys`, in order; returns the last key it looked at (the one
         * that met `limit`, or the last of `keys`), undefined for no keys.
         */
        const claimFrom = (keys: DueKey[]): DueKey | undefined => {
          for (const key of keys) {
            const stored = deliveries.get(key[1]);
            if (stored?.status !== "pending") {
              due.removeSync(key);
              continue;
            }
            if (!taken.fits(stored)) continue;
            claim(stored);
            if (claimed.length >= limit) return key;
          }
          return keys.at(-1);
        };
        const earliest = Array.from(due.getKeys({ end, limit: scan })) as DueKey[];
        claimFrom(earliest);
        if (claimed.length >= limit || earliest.length < scan || !room) return claimed;
        // The scan met only full endpoints' deliveries and more are due: a second window, after
        // where the previous such claim stopped, so that a delivery behind a backlog longer than
        // one scan (a hung endpoint's) is reached within a few claims instead of never.
        const from =
          beyond && compareKeys(beyond, earliest.at(-1) as DueKey) > 0 ? beyond : earliest.at(-1);
        const further = Array.from(
          due.getKeys({ start: from, exclusiveStart: true, end, limit: scan }),
        ) as DueKey[];
        const last = claimFrom(further);
        // The next such claim resumes after the last key this one looked at: none is passed over.
        beyond = claimed.length >= limit ? last : further.length < scan ? undefined : last;
        return claimed;
      });
    },
    async completeAttempt(id, owner, claimedAttempts, result) {
      return deliveries.transaction(() => {
        const stored = deliveries.get(id);
        if (stored?.leaseOwner !== owner || stored.attempts !== claimedAttempts) return false;
        putDelivery(withAttempt(stored, result), stored);
        return true;
      });
    },
    async getDelivery(teamId, id) {
      const delivery = deliveries.get(id);
      return delivery?.teamId === teamId ? delivery : null;
    },
    async listDeliveries(query) {
      const found: DeliveryRecord[] = [];
      if (query.limit <= 0) return found;
      const stored = await this.getEndpoint(query.teamId, query.webhookId);
      if (!stored) return found;
      const keys = dbs.webhookDeliveryIdsByEndpoint.getKeys({
        start: [query.webhookId, query.beforeId ?? PREFIX_END],
        exclusiveStart: query.beforeId !== undefined,
        end: [query.webhookId],
        reverse: true,
      });
      for (const key of keys) {
        const delivery = deliveries.get(key[1]);
        if (!delivery || (query.status && delivery.status !== query.status)) continue;
        found.push(delivery);
        if (found.length >= query.limit) break;
      }
      return found;
    },
    async replay(teamId, webhookId, selection, now) {
      return deliveries.transaction(() => {
        const endpoint = endpoints.get(webhookId);
        if (endpoint?.teamId !== teamId) return 0;
        const ids =
          "deliveryId" in selection
            ? [selection.deliveryId]
            : Array.from(
                dbs.webhookDeliveryIdsByEndpoint.getKeys(prefixRange(webhookId, "ascending")),
                (key) => key[1],
              );
        let replayed = 0;
        for (const id of ids) {
          const stored = deliveries.get(id);
          if (!stored || stored.webhookId !== webhookId || stored.status === "pending") continue;
          if ("failedSince" in selection) {
            if (stored.status !== "failed" || stored.createdAt < selection.failedSince) continue;
          }
          const { succeededAt: _succeededAt, ...kept } = stored;
          putDelivery({ ...kept, status: "pending", attempts: 0, nextAttemptAt: now }, stored);
          replayed++;
        }
        return replayed;
      });
    },
  };
}
