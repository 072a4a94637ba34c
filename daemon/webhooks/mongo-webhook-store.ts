import type {
  AnyBulkWriteOperation,
  Collection,
  Document,
  Filter,
  IndexDescription,
  WithId,
} from "mongodb";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import {
  type ConsentLogDocument,
  OUTBOX_INDEX,
} from "#daemon/consent-log/mongo-consent-log-store.js";
import { cancellableRead } from "#daemon/store/mongo-cancellation.js";
import {
  insertUnderTeamMaximum,
  isOnlyDuplicateKeys,
  READ_LATEST,
  refusedReplace,
} from "#daemon/store/mongo-writes.js";
import type { ReadCancellation } from "#daemon/store/store.js";
import {
  type AttemptResult,
  type ClockHorizons,
  clockHorizons,
  type DeliveryRecord,
  type DeliveryRoom,
  RoomCounter,
  type WebhookEndpointRecord,
  type WebhookStore,
  withAttempt,
} from "#daemon/webhooks/webhook-store.js";

/** Due events one claim looks through at most for those of teams without endpoints to retire. */
const RETIRE_SCAN = 1_000;

/**
 * An endpoint as stored in MongoDB; optional fields are left out rather than stored as null.
 * `slot` is the place an insert under the team's maximum took (insertUnderTeamMaximum).
 */
export type WebhookEndpointDocument = Omit<WebhookEndpointRecord, "id"> & {
  _id: string;
  slot?: number;
};

/** The index of pending deliveries by due time, which every claim reads (claimQuery). */
const DUE_INDEX = {
  name: "webhook_deliveries_due_by_endpoint",
  key: { dueAt: 1, webhookId: 1, teamId: 1 },
} as const;

/** The index of leased pending deliveries by lease end, for leases set ahead (aheadOfClockQueries). */
const LEASE_INDEX = {
  name: "webhook_deliveries_leases",
  key: { leaseUntil: 1 },
} as const;

/** What insertUnderTeamMaximum names: endpoints in its errors, and the index of their slots. */
const ENDPOINT_SLOTS = { what: "webhook", slotIndex: "webhook_endpoints_slot" } as const;

/** The optional fields of an endpoint: a replace unsets those the new record leaves out. */
const OPTIONAL_ENDPOINT_FIELDS: Record<OptionalKeys<WebhookEndpointRecord>, ""> = {
  sealedPreviousSecret: "",
  previousSecretExpiresAt: "",
  disabledReason: "",
  disabledAt: "",
  failingSince: "",
};

type OptionalKeys<T> = {
  [K in keyof T]-?: Record<string, never> extends Pick<T, K> ? K : never;
}[keyof T];

/**
 * A delivery as stored in MongoDB. `dueAt` is present while the delivery is pending: the later of
 * nextAttemptAt and leaseUntil, so one indexed range finds what may be claimed.
 */
export type DeliveryDocument = Omit<DeliveryRecord, "id"> & { _id: string; dueAt?: Date };

/**
 * WebhookStore over the `webhook_endpoints` and `webhook_deliveries` collections, and the outbox
 * embedded in `consent_log` documents (mongo-consent-log-store.ts). Claims are findOneAndUpdate
 * calls whose filter holds the lease condition, so two daemons never claim the same item while a
 * lease runs; a completion is an updateOne conditional on the lease owner and the attempt number.
 */
export class MongoWebhookStore implements WebhookStore {
  static readonly endpointIndexes: IndexDescription[] = [
    { key: { teamId: 1, createdAt: 1, _id: 1 }, name: "webhook_endpoints_by_team" },
    // One endpoint per slot of a team: racing inserts under a maximum cannot share a slot.
    {
      key: { teamId: 1, slot: 1 },
      name: ENDPOINT_SLOTS.slotIndex,
      unique: true,
      partialFilterExpression: { slot: { $exists: true } },
    },
  ];
  static readonly deliveryIndexes: IndexDescription[] = [
    { key: { webhookId: 1, _id: -1 }, name: "webhook_deliveries_by_endpoint" },
    // Due deliveries in order, with what a claim leaves out (endpoints and teams without room)
    // in the keys: a stalled endpoint's backlog is passed over in the index, not fetched.
    { ...DUE_INDEX, partialFilterExpression: { status: "pending" } },
    // Leases by their end, for those set ahead of a claimant's clock (aheadOfClockQueries).
    { ...LEASE_INDEX, partialFilterExpression: { status: "pending" } },
  ];

  /** Indexes an earlier release created, dropped at start-up: every write would keep them up. */
  static readonly retiredDeliveryIndexes = ["webhook_deliveries_due"] as const;

  /** When claims look for events and deliveries set ahead of this clock (AheadOfClockWatch). */
  private readonly eventsAhead = new AheadOfClockWatch();
  private readonly deliveriesAhead = new AheadOfClockWatch();

  constructor(
    private readonly endpoints: Collection<WebhookEndpointDocument>,
    private readonly deliveries: Collection<DeliveryDocument>,
    private readonly consentLog: Collection<ConsentLogDocument>,
  ) {}

  /** Under a maximum, the insert takes a free slot of its team (insertUnderTeamMaximum). */
  async insertEndpoint(endpoint: WebhookEndpointRecord, maxPerTeam?: number): Promise<boolean> {
    const { id, ...fields } = endpoint;
    const document = withoutAbsent({ _id: id, ...fields });
    return insertUnderTeamMaximum(this.endpoints, document, maxPerTeam, ENDPOINT_SLOTS);
  }

  async getEndpoint(teamId: string, id: string): Promise<WebhookEndpointRecord | null> {
    const document = await this.endpoints.findOne({ _id: id, teamId });
    return document ? endpointOf(document) : null;
  }

  async listEndpoints(teamId: string, cancel?: ReadCancellation): Promise<WebhookEndpointRecord[]> {
    const documents = await cancellableRead(cancel, (options) =>
      this.endpoints.find({ teamId }, options).sort({ createdAt: 1, _id: 1 }).toArray(),
    );
    return documents.map(endpointOf);
  }

  async endpointsAfter(afterId: string | null, limit: number): Promise<WebhookEndpointRecord[]> {
    // The port's empty page: the driver would read limit 0 as none, a negative one as a batch.
    if (limit <= 0) return [];
    const documents = await this.endpoints
      .find(afterId === null ? {} : { _id: { $gt: afterId } })
      .sort({ _id: 1 })
      .limit(limit)
      .toArray();
    return documents.map(endpointOf);
  }

  async replaceEndpoint(next: WebhookEndpointRecord, expectedVersion: number): Promise<boolean> {
    if (next.version !== expectedVersion + 1) {
      throw new RangeError(`webhook version ${next.version} does not follow ${expectedVersion}`);
    }
    const { id, ...fields } = next;
    // Every field of the record is set and the optional ones it leaves out are unset: the
    // document becomes the record, and keeps its slot (which a replaceOne would drop).
    const present = withoutAbsent(fields);
    const absent = Object.keys(OPTIONAL_ENDPOINT_FIELDS).filter(
      (field) => !Object.hasOwn(present, field),
    );
    // The version in the filter makes the replace a compare-and-set: one of concurrent callers wins.
    // The identity fields in the filter too: a replace never moves them (the port's promise).
    const result = await this.endpoints.updateOne(
      { _id: id, teamId: next.teamId, createdAt: next.createdAt, version: expectedVersion },
      {
        $set: present,
        ...(absent.length > 0 && {
          $unset: Object.fromEntries(absent.map((field) => [field, ""])),
        }),
      },
    );
    if (result.matchedCount === 1) return true;
    return refusedReplace(this.endpoints, id, expectedVersion, "a webhook's teamId or createdAt");
  }

  async deleteEndpoint(teamId: string, id: string): Promise<boolean> {
    const result = await this.endpoints.deleteOne({ _id: id, teamId });
    // Two writes where the embedded store makes one transaction, and a multi-document delete is
    // not retried (mongo-store.ts): the deliveries are removed even when the endpoint is already
    // gone, so a call repeated after a failure here finishes the removal (and answers false).
    await this.deliveries.deleteMany({ webhookId: id, teamId });
    return result.deletedCount === 1;
  }

  async claimEvents(
    lease: { owner: string; until: Date },
    now: Date,
    limit: number,
  ): Promise<ConsentLogRecord[]> {
    if (limit <= 0) return [];
    // First the events set ahead of this clock, when it is time to look (AheadOfClockWatch),
    // till none is left; then those due.
    const filters = [dueEvents(now)];
    if (this.eventsAhead.look(lease, now)) filters.unshift(aheadEvents(clockHorizons(lease, now)));
    for (const filter of filters)
      await this.retireUnsubscribed(filter, Math.max(limit, RETIRE_SCAN));
    const claimed: ConsentLogRecord[] = [];
    const subscribes = new Set<string>();
    let retired = 0;
    for (let filter = filters[0]; claimed.length < limit && filter; filter = filters[0]) {
      // The due time in the filter is the lease: a claimed event is due again only at lease end.
      const document = await this.consentLog.findOneAndUpdate(
        filter,
        { $set: { "outbox.dueAt": lease.until, "outbox.leaseOwner": lease.owner } },
        {
          sort: { "outbox.dueAt": 1 },
          // A name, as for deliveries (claimQuery): the driver types only a key pattern.
          hint: OUTBOX_INDEX.name as unknown as Document,
          returnDocument: "after",
        },
      );
      if (!document) {
        filters.shift();
        continue;
      }
      const row = logRecordOf(document);
      // Port: an event of a team without endpoints fans out to nothing, so it is retired here.
      if (retired < limit && !(await this.hasEndpoints(row.teamId, subscribes))) {
        await this.consentLog.updateOne(
          { _id: document._id, "outbox.leaseOwner": lease.owner },
          { $unset: { outbox: "" } },
        );
        retired++;
        continue;
      }
      claimed.push(row);
    }
    // The limit was reached among events set ahead: the next claim looks again.
    if (filters.length > 1) this.eventsAhead.again();
    return claimed;
  }

  /**
   * Port: the due events of teams without endpoints are retired, not handed out. Most teams have
   * none, and every explicit choice puts an event in the outbox, so they are retired in three
   * round trips for up to `scan` due events (as the embedded store retires up to 1,000 in one
   * transaction), not three per event. The endpoints are read after the events: an event appended
   * once its team's first endpoint was stored finds that endpoint and stays. An event another
   * claimer leased meanwhile is due again only at its lease end, so the update passes it over.
   */
  private async retireUnsubscribed(
    dueFilter: Filter<ConsentLogDocument>,
    scan: number,
  ): Promise<void> {
    const due = await this.consentLog
      .find(dueFilter, {
        projection: { teamId: 1 },
        sort: { "outbox.dueAt": 1 },
        hint: OUTBOX_INDEX.name,
        limit: scan,
      })
      .toArray();
    if (due.length === 0) return;
    const teamIds = [...new Set(due.map((event) => event.teamId))];
    const subscribed = new Set(
      await this.endpoints.distinct("teamId", { teamId: { $in: teamIds } }, READ_LATEST),
    );
    const unsubscribed = due.filter((event) => !subscribed.has(event.teamId));
    if (unsubscribed.length === 0) return;
    await this.consentLog.updateMany(
      { _id: { $in: unsubscribed.map((event) => event._id) }, ...dueFilter },
      { $unset: { outbox: "" } },
    );
  }

  /**
   * Whether a team has any endpoint. Only a yes is remembered (`subscribed`): a no is asked again
   * for each event, after its claim, so an event appended once an endpoint exists is never
   * retired on an answer read before (the claim spans many round trips).
   */
  private async hasEndpoints(teamId: string, subscribed: Set<string>): Promise<boolean> {
    if (subscribed.has(teamId)) return true;
    const found = await this.endpoints.findOne(
      { teamId },
      { ...READ_LATEST, projection: { _id: 1 } },
    );
    if (found) subscribed.add(teamId);
    return found !== null;
  }

  async fanOut(
    consentLogId: string,
    created: readonly DeliveryRecord[],
  ): Promise<DeliveryRecord[]> {
    // upsertedIds: operation index → _id of each document this call inserted.
    let inserted: Record<number, unknown> = {};
    if (created.length > 0) {
      // Deterministic ids make a repeated fan-out a no-op: $setOnInsert leaves stored ones alone.
      const writes: AnyBulkWriteOperation<DeliveryDocument>[] = created.map((delivery) => ({
        updateOne: {
          filter: { _id: delivery.id },
          update: { $setOnInsert: deliveryDocumentOf(delivery) },
          upsert: true,
        },
      }));
      try {
        inserted = (await this.deliveries.bulkWrite(writes, { ordered: false })).upsertedIds;
      } catch (error) {
        // Two concurrent upserts of one _id: the loser's duplicate-key error means it is stored
        // (by the other caller). The error's result still says what this call inserted. Any other
        // failure is thrown before the event is retired, so the next fan-out stores what is missing.
        if (!isOnlyDuplicateKeys(error)) throw error;
        inserted = error.result.upsertedIds;
      }
    }
    await this.consentLog.updateOne({ _id: consentLogId }, { $unset: { outbox: "" } });
    return this.withoutRemovedEndpoints(
      Object.keys(inserted).map((index) => created[Number(index)] as DeliveryRecord),
    );
  }

  /**
   * Port: no delivery outlives its endpoint. deleteEndpoint removes the endpoint, then its
   * deliveries; a fan-out that read the endpoints before the removal may insert after it. Read
   * after the insert, the endpoint is gone in that case, and what was inserted for it is removed
   * here and not handed to the caller; an insert made before the removal is the removal's to clear.
   */
  private async withoutRemovedEndpoints(stored: DeliveryRecord[]): Promise<DeliveryRecord[]> {
    const ids = [...new Set(stored.map((delivery) => delivery.webhookId))];
    if (ids.length === 0) return stored;
    const live = await this.endpoints
      .find({ _id: { $in: ids } }, { ...READ_LATEST, projection: { _id: 1 } })
      .toArray();
    const liveIds = new Set(live.map((endpoint) => endpoint._id));
    const removed = ids.filter((id) => !liveIds.has(id));
    if (removed.length === 0) return stored;
    await this.deliveries.deleteMany({ webhookId: { $in: removed } });
    return stored.filter((delivery) => liveIds.has(delivery.webhookId));
  }

  async claimDeliveries(
    lease: { owner: string; until: Date },
    now: Date,
    limit: number,
    room?: DeliveryRoom,
  ): Promise<DeliveryRecord[]> {
    const claimed: DeliveryRecord[] = [];
    const taken = new RoomCounter(room);
    // First what was leased or scheduled ahead of this clock, when it is time to look
    // (AheadOfClockWatch), a query at a time till none is left; then what is due.
    const ahead = this.deliveriesAhead.look(lease, now)
      ? aheadOfClockQueries(clockHorizons(lease, now))
      : [];
    // The lease, and a next attempt no later than now (nextAttemptAtClaim): a no-op but for a
    // retry set ahead of this clock.
    const update = {
      $set: { leaseOwner: lease.owner, leaseUntil: lease.until, dueAt: lease.until },
      $min: { nextAttemptAt: now },
    };
    while (claimed.length < limit) {
      const full = taken.full();
      const [first] = ahead;
      const { filter, sort, hint } = first
        ? { ...first, filter: { ...first.filter, ...withoutFull(full) }, sort: undefined }
        : claimQuery(now, full);
      const document = await this.deliveries.findOneAndUpdate(filter, update, {
        sort,
        // findAndModify takes an index's name as its hint (MongoDB 4.4 on); the driver types
        // only a key pattern but sends either as given.
        hint: hint as unknown as Document,
        returnDocument: "after",
      });
      if (!document) {
        // A query that finds none is done with: the next one, till the due deliveries'.
        if (ahead.shift()) continue;
        break;
      }
      const delivery = deliveryOf(document);
      claimed.push(delivery);
      taken.take(delivery);
    }
    // The limit was reached among deliveries set ahead: the next claim looks again.
    if (ahead.length > 0) this.deliveriesAhead.again();
    return claimed;
  }

  async completeAttempt(
    id: string,
    owner: string,
    claimedAttempts: number,
    result: AttemptResult,
  ): Promise<boolean> {
    const claimed = { _id: id, leaseOwner: owner, attempts: claimedAttempts };
    const stored = await this.deliveries.findOne(claimed, READ_LATEST);
    if (!stored) return false;
    const next = deliveryDocumentOf(withAttempt(deliveryOf(stored), result));
    // The same condition again: a delivery that moved on between read and write is left alone.
    // Matched, not modified: a replace that matched stores the attempt's outcome even when the
    // document already held it, which the server counts as no modification.
    const replaced = await this.deliveries.replaceOne(claimed, next);
    return replaced.matchedCount === 1;
  }

  async getDelivery(teamId: string, id: string): Promise<DeliveryRecord | null> {
    const document = await this.deliveries.findOne({ _id: id, teamId });
    return document ? deliveryOf(document) : null;
  }

  async listDeliveries(query: Parameters<WebhookStore["listDeliveries"]>[0]) {
    if (query.limit <= 0) return [];
    const filter: Filter<DeliveryDocument> = { teamId: query.teamId, webhookId: query.webhookId };
    if (query.status) filter.status = query.status;
    if (query.beforeId !== undefined) filter._id = { $lt: query.beforeId };
    const documents = await cancellableRead(query.cancel, (options) =>
      this.deliveries.find(filter, options).sort({ _id: -1 }).limit(query.limit).toArray(),
    );
    return documents.map(deliveryOf);
  }

  async replay(
    teamId: string,
    webhookId: string,
    selection: Parameters<WebhookStore["replay"]>[2],
    now: Date,
  ): Promise<number> {
    const filter: Filter<DeliveryDocument> =
      "deliveryId" in selection
        ? { _id: selection.deliveryId, teamId, webhookId, status: { $ne: "pending" } }
        : { teamId, webhookId, status: "failed", createdAt: { $gte: selection.failedSince } };
    const result = await this.deliveries.updateMany(filter, {
      $set: { status: "pending", attempts: 0, nextAttemptAt: now, dueAt: now },
      $unset: { succeededAt: "", leaseOwner: "", leaseUntil: "" },
    });
    // Unlike completeAttempt's replace, this update cannot leave a matched delivery as it was:
    // the filter takes only deliveries that are not pending and the update makes each pending,
    // and one that another replay made pending first is matched again on write and left out.
    // So modifiedCount equals matchedCount here: the deliveries this call made pending.
    return result.modifiedCount;
  }
}

/**
 * The delivery a claim takes at `now`: the first due, endpoints and teams without room (`full`)
 * left out so that it never claims for them. It is read through DUE_INDEX (hinted): a scan of
 * `dueAt <= now`, in dueAt order so no sort, whose webhookId and teamId keys take the `$nin`s as
 * bounds, so the excluded deliveries are passed over in the index; the partial filter holds
 * exactly the pending deliveries. Only the lease condition is checked on the fetched document,
 * and it holds for every one of them: dueAt is never before leaseUntil (deliveryDocumentOf, and
 * a claim sets both), so it guards the lease should a write ever break that. Without the hint a
 * claim that excludes a full endpoint could be planned on webhook_deliveries_by_endpoint (its
 * `$nin` makes that index a candidate too), which fetches every delivery of the other endpoints,
 * sent ones included, and sorts them in memory; a plan cached from a moment it won would keep
 * doing so. The hint names the index: a hint by key pattern fails every claim once another index
 * with the same keys exists (one made by hand with another partial filter or a collation), which
 * MongoDB refuses as ambiguous ("Hint matched multiple indexes, must hint by index name").
 */
export function claimQuery(now: Date, full: FullOwners) {
  const filter: Filter<DeliveryDocument> = {
    status: "pending",
    dueAt: { $lte: now },
    $or: [{ leaseUntil: { $exists: false } }, { leaseUntil: { $lte: now } }],
    ...withoutFull(full),
  };
  return { filter, sort: { dueAt: 1 } as const, hint: DUE_INDEX.name };
}

/** The endpoints and teams without room (RoomCounter.full), which a claim leaves out. */
type FullOwners = { webhookIds: readonly string[]; teamIds: readonly string[] };

function withoutFull(full: FullOwners): Filter<DeliveryDocument> {
  return {
    ...(full.webhookIds.length > 0 && { webhookId: { $nin: [...full.webhookIds] } }),
    ...(full.teamIds.length > 0 && { teamId: { $nin: [...full.teamIds] } }),
  };
}

/**
 * The pending deliveries leased, or due, beyond the claimant's horizons (WebhookStore, "Clock
 * steps"), as two queries, each hinted by name on the index that answers it exactly: a range of
 * LEASE_INDEX, and one of DUE_INDEX (dueAt is the later of the retry and the lease end, so a
 * retry beyond its horizon is there). Each names `status: "pending"`, the partial filter of both
 * indexes, which a query must imply for the index to answer it. Not one `$or`: a hint applies
 * to the whole `$or`, not clause by clause, and unhinted its plan is the planner's choice. Both
 * ranges are empty while the clocks agree (a lease ends within one lease length, a retry within
 * the longest wait), so each is a look at one index key.
 */
function aheadOfClockQueries(horizons: ClockHorizons) {
  return [
    {
      filter: { status: "pending", leaseUntil: { $gt: horizons.leases } },
      hint: LEASE_INDEX.name,
    },
    { filter: { status: "pending", dueAt: { $gt: horizons.retries } }, hint: DUE_INDEX.name },
  ] satisfies { filter: Filter<DeliveryDocument>; hint: string }[];
}

/**
 * The outbox events due at `now`: a range of OUTBOX_INDEX, naming the outbox so that it implies
 * the index's partial filter.
 */
function dueEvents(now: Date): Filter<ConsentLogDocument> {
  return { outbox: { $exists: true }, "outbox.dueAt": { $lte: now } };
}

/** The outbox events set ahead of the claimant's clock (WebhookStore, "Clock steps"). */
function aheadEvents(horizons: ClockHorizons): Filter<ConsentLogDocument> {
  return { outbox: { $exists: true }, "outbox.dueAt": { $gt: horizons.leases } };
}

/**
 * When a claimant looks for items set ahead of its clock (WebhookStore, "Clock steps"): at its
 * first claim, whenever its clock reads earlier than at the last look (a step back), and else
 * at most once per lease length, so a claim between looks costs no round trip for a rare event.
 * An item another daemon set ahead of this clock is thus taken over within a lease length of
 * when it would be due. A look that stops at the claim's limit leaves the next claim to look.
 */
class AheadOfClockWatch {
  private last: number | undefined;

  look(lease: { until: Date }, now: Date): boolean {
    const at = now.getTime();
    const leaseMs = lease.until.getTime() - at;
    const due = this.last === undefined || at < this.last || at - this.last >= leaseMs;
    if (due) this.last = at;
    return due;
  }

  again(): void {
    this.last = undefined;
  }
}

function endpointOf(document: WithId<WebhookEndpointDocument>): WebhookEndpointRecord {
  const { _id, slot: _slot, ...fields } = document;
  return withoutAbsent({ id: _id, ...fields });
}

function deliveryOf(document: WithId<DeliveryDocument>): DeliveryRecord {
  const { _id, dueAt: _dueAt, ...fields } = document;
  return withoutAbsent({ id: _id, ...fields });
}

function deliveryDocumentOf(delivery: DeliveryRecord): DeliveryDocument {
  const { id, ...fields } = delivery;
  const document: DeliveryDocument = { _id: id, ...fields };
  if (delivery.status === "pending") {
    const next = delivery.nextAttemptAt?.getTime() ?? 0;
    const lease = delivery.leaseUntil?.getTime() ?? 0;
    document.dueAt = new Date(Math.max(next, lease));
  }
  return withoutAbsent(document);
}

function logRecordOf(document: WithId<ConsentLogDocument>): ConsentLogRecord {
  const { _id, outbox: _outbox, ...fields } = document;
  return withoutAbsent({ id: _id, ...fields });
}

/** Drops undefined and null fields: an optional field of the port is present or missing. */
function withoutAbsent<T extends object>(value: T): T {
  return Object.fromEntries(
    Object.entries(value).filter(([, field]) => field !== undefined && field !== null),
  ) as T;
}
