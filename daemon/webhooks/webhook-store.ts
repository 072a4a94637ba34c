import { CLOCK_SKEW_MS } from "#daemon/clock.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import type { ReadCancellation } from "#daemon/store/store.js";
import { LONGEST_RETRY_WAIT_MS } from "#daemon/webhooks/retry-schedule.js";

/** Event types an endpoint may subscribe to (spec 6: only `consent.given` exists). */
export const EVENT_TYPES = ["consent.given"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** One subscribed endpoint of a team (decisions §8). */
export interface WebhookEndpointRecord {
  id: string;
  teamId: string;
  url: string;
  eventTypes: string[];
  /** Public Banner IDs; empty: every banner of the team. */
  bannerIds: string[];
  description: string;
  enabled: boolean;
  /** The signing secret, sealed with the daemon's webhook-secret key (webhook-secrets.ts). */
  sealedSecret: string;
  /** After a rotation: the previous secret, still signing until previousSecretExpiresAt. */
  sealedPreviousSecret?: string;
  previousSecretExpiresAt?: Date;
  disabledReason?: string;
  disabledAt?: Date;
  /** First failed attempt of the current run of failures; cleared by a success. */
  failingSince?: Date;
  createdAt: Date;
  updatedAt: Date;
  /** Optimistic-concurrency counter: 1 on creation, +1 per replace. */
  version: number;
}

/**
 * The endpoint without its previous secret once that secret's grace period has ended at `now`
 * (the same object when there is nothing to drop). The dispatcher signs with the previous secret
 * only before previousSecretExpiresAt; reads hide an expired one, and every write drops it.
 */
export function withoutExpiredPreviousSecret(
  endpoint: WebhookEndpointRecord,
  now: Date,
): WebhookEndpointRecord {
  const expiresAt = endpoint.previousSecretExpiresAt;
  if (endpoint.sealedPreviousSecret === undefined && expiresAt === undefined) return endpoint;
  if (expiresAt && expiresAt > now && endpoint.sealedPreviousSecret !== undefined) return endpoint;
  const {
    sealedPreviousSecret: _sealedPreviousSecret,
    previousSecretExpiresAt: _previousSecretExpiresAt,
    ...kept
  } = endpoint;
  return kept;
}

/** How many times changeEndpoint reads the endpoint again after a rival's write got there first. */
const ENDPOINT_CHANGE_ATTEMPTS = 5;

/**
 * Optimistic read-modify-write of an endpoint at `at`: `changed` once the change is stored,
 * `unchanged` when `change` returns the endpoint it was given (nothing to write), `removed` when
 * the endpoint is gone (it is left alone), `contended` when rivals' writes won every attempt. Like
 * every write of an endpoint, it drops a previous secret whose grace period is over.
 */
export async function changeEndpoint(
  store: WebhookStore,
  endpoint: WebhookEndpointRecord,
  at: Date,
  change: (endpoint: WebhookEndpointRecord) => WebhookEndpointRecord,
): Promise<"changed" | "unchanged" | "removed" | "contended"> {
  let current: WebhookEndpointRecord | null = endpoint;
  for (let i = 0; i < ENDPOINT_CHANGE_ATTEMPTS; i++) {
    if (!current) return "removed";
    const changed = change(current);
    if (changed === current) return "unchanged";
    const next = withoutUndefined({
      ...withoutExpiredPreviousSecret(changed, at),
      version: current.version + 1,
    });
    if (await store.replaceEndpoint(next, current.version)) return "changed";
    current = await store.getEndpoint(endpoint.teamId, endpoint.id);
  }
  return current ? "contended" : "removed";
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

export type DeliveryStatus = "pending" | "succeeded" | "failed";

/** One event's delivery to one endpoint. */
export interface DeliveryRecord {
  /** Deterministic: deliveryId(eventId, webhookId), so a repeated fan-out adds nothing. */
  id: string;
  teamId: string;
  webhookId: string;
  /** The Standard Webhooks `webhook-id`, the same on every attempt. */
  eventId: string;
  eventType: string;
  publicId: string;
  /** The exact body of every attempt. */
  payload: string;
  status: DeliveryStatus;
  attempts: number;
  createdAt: Date;
  /** When a pending delivery is next due. */
  nextAttemptAt?: Date;
  /** The daemon holding the delivery while it sends, and until when (lease-based claiming). */
  leaseOwner?: string;
  leaseUntil?: Date;
  lastAttemptAt?: Date;
  lastStatusCode?: number;
  lastError?: string;
  lastResponseExcerpt?: string;
  succeededAt?: Date;
}

/** The result of one attempt, as completeAttempt() stores it. */
export type AttemptResult = Pick<
  DeliveryRecord,
  | "attempts"
  | "status"
  | "nextAttemptAt"
  | "lastAttemptAt"
  | "lastStatusCode"
  | "lastError"
  | "lastResponseExcerpt"
  | "succeededAt"
>;

/** The fields an attempt sets; completeAttempt() clears those the result leaves unset. */
export const ATTEMPT_FIELDS = [
  "attempts",
  "status",
  "nextAttemptAt",
  "lastAttemptAt",
  "lastStatusCode",
  "lastError",
  "lastResponseExcerpt",
  "succeededAt",
] as const satisfies readonly (keyof AttemptResult)[];

/** A stored delivery with the result of one more attempt; the lease is released. */
export function withAttempt(stored: DeliveryRecord, result: AttemptResult): DeliveryRecord {
  const next: DeliveryRecord = { ...stored };
  delete next.leaseOwner;
  delete next.leaseUntil;
  for (const field of ATTEMPT_FIELDS) delete next[field];
  for (const [field, value] of Object.entries(result)) {
    if (value !== undefined) Object.assign(next, { [field]: value });
  }
  return next;
}

/** A claim: `owner` holds what it claimed until `until`, after which anyone may claim it again. */
export interface Lease {
  owner: string;
  until: Date;
}

/**
 * Beyond which a claimant at `now` takes a due time for one set by a clock ahead of its own: a
 * daemon's before its clock was set back (or the store's before a restart with a clock behind).
 * Such an item counts as due now (WebhookStore, "Clock steps"). A lease stands while it ends
 * within two of the claimant's lease lengths of now, so a daemon whose clock runs up to a lease
 * length ahead, or whose leases are up to twice as long, keeps its own; a retry stands while it
 * is due within the longest wait the retry schedule gives. CLOCK_SKEW_MS more for either.
 */
export interface ClockHorizons {
  leases: Date;
  retries: Date;
}

/** The horizons of a claim under `lease` at `now`: the lease's length is until − now. */
export function clockHorizons(lease: Lease, now: Date): ClockHorizons {
  const leaseMs = Math.max(0, lease.until.getTime() - now.getTime());
  return {
    leases: new Date(lease.until.getTime() + leaseMs + CLOCK_SKEW_MS),
    retries: new Date(now.getTime() + LONGEST_RETRY_WAIT_MS + CLOCK_SKEW_MS),
  };
}

/**
 * A claimed delivery's next attempt is no later than the claim: a retry set ahead of the
 * claimant's clock (ClockHorizons) is due now, and the stored delivery says so.
 */
export function nextAttemptAtClaim(delivery: DeliveryRecord, now: Date): Date {
  const next = delivery.nextAttemptAt;
  return next && next < now ? next : now;
}

export interface DeliveryQuery {
  teamId: string;
  webhookId: string;
  status?: DeliveryStatus;
  /** Only deliveries with an id lower than this one (the previous page's last id). */
  beforeId?: string;
  limit: number;
  /** Stops the read (ReadCancellation). */
  cancel?: ReadCancellation;
}

export type ReplaySelection = { deliveryId: string } | { failedSince: Date };

/**
 * The id of an event's delivery to one endpoint. Event ids carry the consentLogId, a UUIDv7, so
 * delivery ids of one endpoint sort by the time of their event.
 */
export function deliveryId(eventId: string, webhookId: string): string {
  return `dlv_${eventId.replace(/^evt_/, "")}_${webhookId.replaceAll("-", "")}`;
}

/** The `webhook-id` of the `consent.given` event of a consent log row. */
export function eventIdOf(consentLogId: string): string {
  return `evt_${consentLogId.replaceAll("-", "")}`;
}

/** Whose attempt a delivery is: its endpoint and its team. */
export type AttemptOwner = Pick<DeliveryRecord, "webhookId" | "teamId">;

/**
 * What a caller may add to its attempts in flight: at most `perEndpoint` to one endpoint and
 * `perTeam` for one team, counting the attempts it has `inFlight`.
 */
export interface DeliveryRoom {
  perEndpoint: number;
  perTeam: number;
  inFlight: Iterable<AttemptOwner>;
  /**
   * How many more attempts may be taken by teams that already have one in flight; beyond it, only
   * a team with none may take one. Unset: no such reserve.
   */
  shared?: number;
}

/** Counts what a claim (or a fan-out) takes against a DeliveryRoom; no room given: no limit. */
export class RoomCounter {
  private readonly endpoints = new Map<string, number>();
  private readonly teams = new Map<string, number>();

  /** What teams already in flight may still take (DeliveryRoom.shared). */
  private shared: number;

  constructor(private readonly room: DeliveryRoom | undefined) {
    for (const owner of room?.inFlight ?? []) this.count(owner);
    this.shared = room?.shared ?? Number.POSITIVE_INFINITY;
  }

  fits(delivery: AttemptOwner): boolean {
    const { room } = this;
    if (!room) return true;
    const team = this.teams.get(delivery.teamId) ?? 0;
    return (
      (this.endpoints.get(delivery.webhookId) ?? 0) < room.perEndpoint &&
      team < room.perTeam &&
      (team === 0 || this.shared > 0)
    );
  }

  /** Every take uses up shared room, a team's first too, so one pass counts as several would. */
  take(delivery: AttemptOwner): void {
    this.shared--;
    this.count(delivery);
  }

  private count(delivery: AttemptOwner): void {
    this.endpoints.set(delivery.webhookId, (this.endpoints.get(delivery.webhookId) ?? 0) + 1);
    this.teams.set(delivery.teamId, (this.teams.get(delivery.teamId) ?? 0) + 1);
  }

  /** The endpoints and the teams with no room left, for a query to leave out. */
  full(): { webhookIds: string[]; teamIds: string[] } {
    const { room } = this;
    const atMax = (counts: Map<string, number>, max: number) =>
      [...counts].filter(([, count]) => count >= max).map(([id]) => id);
    // With the shared room used up, every team already in flight is full.
    return room
      ? {
          webhookIds: atMax(this.endpoints, room.perEndpoint),
          teamIds: atMax(this.teams, this.shared > 0 ? room.perTeam : 1),
        }
      : { webhookIds: [], teamIds: [] };
  }
}

/**
 * Storage port for webhook endpoints, the event outbox and deliveries.
 *
 * The outbox: ConsentLogStore.append() writes a row and, for an explicit choice, its pending
 * `consent.given` event in one atomic write. claimEvents() hands pending events out under a lease,
 * fanOut() turns one into deliveries (one per matching endpoint) and retires it.
 *
 * Leases: under concurrent claimEvents()/claimDeliveries() calls, from any number of daemons on the
 * store, an item is handed to exactly one caller until its lease expires; an item whose lease
 * expired (its holder died) is handed out again.
 *
 * Clock steps: due times and lease ends are the clocks' of the daemons that set them. A claim
 * counts an item as due also when its due time lies beyond the caller's ClockHorizons (an event
 * or a leased delivery beyond `leases`, a delivery's retry beyond `retries`): it was set before a
 * clock was stepped back, and waiting for it would stall the item for the size of the step. A
 * claimed delivery's nextAttemptAt is never after the claim (nextAttemptAtClaim). An adapter for
 * which looking for such items costs a round trip may look at a caller's first claim, whenever
 * its clock reads earlier than at its last look, and else once per lease length (MongoDB's).
 */
export interface WebhookStore {
  /**
   * Stores a new endpoint and returns true; the id is unique (DuplicateKeyError). With
   * `maxPerTeam`, stores nothing and returns false when the team already has that many endpoints.
   * The count and the insert are one atomic step: however many inserts of one team race, at most
   * maxPerTeam endpoints are stored, and a racer is refused only when they are. An adapter that
   * settles races by trying again may give up on a long run of them (InsertContendedError).
   */
  insertEndpoint(endpoint: WebhookEndpointRecord, maxPerTeam?: number): Promise<boolean>;
  /** An endpoint of the team; null when absent or another team's. */
  getEndpoint(teamId: string, id: string): Promise<WebhookEndpointRecord | null>;
  /** The team's endpoints, oldest first; `cancel` stops the read (ReadCancellation). */
  listEndpoints(teamId: string, cancel?: ReadCancellation): Promise<WebhookEndpointRecord[]>;
  /**
   * Up to `limit` endpoints of every team, in id order, those after `afterId` (all when null):
   * a sweep over the whole store, page by page. A `limit` of 0 or less is an empty page, never
   * "no limit" (MongoDB's reading of a cursor's limit 0).
   */
  endpointsAfter(afterId: string | null, limit: number): Promise<WebhookEndpointRecord[]>;
  /**
   * Replaces the endpoint when the stored version equals expectedVersion (next.version must be
   * expectedVersion + 1). Under concurrent calls with the same expectedVersion exactly one succeeds.
   */
  replaceEndpoint(next: WebhookEndpointRecord, expectedVersion: number): Promise<boolean>;
  /** Removes an endpoint of the team and its deliveries; false when there was none. */
  deleteEndpoint(teamId: string, id: string): Promise<boolean>;

  /**
   * Claims up to `limit` pending outbox events due at `now` (oldest first) under `lease`. The due
   * events it meets of a team that has no endpoint at all would fan out to nothing: it retires
   * them instead of handing them out (up to a bound per call, at least `limit`; past it they are
   * handed out). An event appended after the team's first endpoint was stored is never retired.
   */
  claimEvents(lease: Lease, now: Date, limit: number): Promise<ConsentLogRecord[]>;
  /**
   * Stores the deliveries of one event (those already stored are left as they are) and retires the
   * event from the outbox. Safe to repeat: a fan-out interrupted half-way is finished by the next.
   * A delivery may be stored already leased (leaseOwner, leaseUntil), so its fan-out can attempt it
   * at once without a claim. Returns the deliveries this call stored, which alone its caller holds.
   * A delivery to an endpoint removed meanwhile is not kept (nor returned): whether the removal
   * comes before or after the fan-out, no delivery of a removed endpoint remains.
   */
  fanOut(consentLogId: string, deliveries: readonly DeliveryRecord[]): Promise<DeliveryRecord[]>;

  /**
   * Claims up to `limit` pending deliveries due at `now`, earliest due first, under `lease`. With
   * `room`, no endpoint and no team gets more than its maximum less the caller's attempts in
   * flight for it (the caller's connections to an endpoint, a team's share of the caller's
   * slots); the others stay due for later. However many due deliveries of endpoints without room
   * come first (a hung endpoint's backlog), one of an endpoint with room is claimed within a few
   * calls: a slow endpoint never holds up the others' deliveries for long.
   */
  claimDeliveries(
    lease: Lease,
    now: Date,
    limit: number,
    room?: DeliveryRoom,
  ): Promise<DeliveryRecord[]>;
  /**
   * Records what became of a delivery claimed under `owner` with `claimedAttempts` attempts made,
   * and releases the lease. False (nothing written) when the delivery has moved on meanwhile (its
   * lease passed to another owner, or it was replayed or removed).
   */
  completeAttempt(
    id: string,
    owner: string,
    claimedAttempts: number,
    result: AttemptResult,
  ): Promise<boolean>;
  /** A delivery of the team; null when absent or another team's. */
  getDelivery(teamId: string, id: string): Promise<DeliveryRecord | null>;
  /** One endpoint's deliveries, newest first. */
  listDeliveries(query: DeliveryQuery): Promise<DeliveryRecord[]>;
  /**
   * Makes deliveries of the endpoint pending and due at `now`, attempts reset to 0: one delivery
   * (any status but pending), or every failed one created at or after failedSince. Returns how many.
   */
  replay(teamId: string, webhookId: string, selection: ReplaySelection, now: Date): Promise<number>;
}
