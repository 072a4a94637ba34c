import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Clock } from "#daemon/clock.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { messageOf } from "#daemon/errors.js";
import { isStoreFull } from "#daemon/store/disk-guard.js";
import type { Store } from "#daemon/store/store.js";
import { settleAll, storeFailureLog } from "#daemon/store/store-failures.js";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import type { Load } from "#daemon/webhooks/load-gauge.js";
import { consentGivenBody, onOutboxEvent } from "#daemon/webhooks/outbox.js";
import { nextAttemptAt, retryAfterMs } from "#daemon/webhooks/retry-schedule.js";
import { signedHeaders } from "#daemon/webhooks/signing.js";
import type { WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import {
  ATTEMPTS_PER_ENDPOINT,
  DELIVERY_TIMEOUT_MS,
  DeliveryAgents,
  MAX_IN_FLIGHT,
  type SendOutcome,
  sendWebhook,
} from "#daemon/webhooks/webhook-sender.js";
import {
  type AttemptOwner,
  type AttemptResult,
  changeEndpoint,
  type DeliveryRecord,
  type DeliveryRoom,
  deliveryId,
  eventIdOf,
  RoomCounter,
  type WebhookEndpointRecord,
  withoutExpiredPreviousSecret,
} from "#daemon/webhooks/webhook-store.js";

/** docs/webhooks.md: an endpoint whose every attempt failed for this long is disabled. */
export const FAILING_DISABLE_AFTER_MS = 5 * 24 * 3_600_000;
/** A claim outlives the longest attempt by far, so a live holder never loses it mid-send. */
export const LEASE_MS = DELIVERY_TIMEOUT_MS * 4;
const EVENT_BATCH = 200;
/**
 * After a pass that found work, or a nudge, the next pass waits this long, so the events appended
 * meanwhile are claimed and fanned out together: a few store commits per batch instead of three
 * per event, which every append (and every other daemon's append) would otherwise queue behind.
 */
export const BATCH_WINDOW_MS = 10;
/**
 * What one pass may take on: events claimed, attempts started (never more than MAX_IN_FLIGHT in
 * flight in all), and attempts in flight to one endpoint and for one team.
 */
interface PassLimits {
  events: number;
  starts: number;
  perEndpoint: number;
  perTeam: number;
}

/**
 * A team gets at most half the slots, however many endpoints it has (several slow endpoints of
 * one team cannot hold them all), and the last RESERVED_FOR_NEW_TEAMS free slots go only to
 * teams with no attempt in flight: two or more teams with slow endpoints cannot hold every slot
 * either, and a team whose deliveries are not waiting on anyone is never made to wait behind them.
 */
export const RESERVED_FOR_NEW_TEAMS = 16;
export const FULL_SPEED: PassLimits = {
  events: EVENT_BATCH,
  starts: MAX_IN_FLIGHT,
  perEndpoint: ATTEMPTS_PER_ENDPOINT,
  perTeam: MAX_IN_FLIGHT / 2,
};
/**
 * Under load (docs/webhooks.md, "Under load"): while the process is saturated by calls, a pass
 * runs every YIELD_WINDOW_MS with these limits, so visitors' requests keep the CPU. Starts, not
 * attempts in flight, are limited: attempts hanging at one endpoint cost no CPU and must not
 * hold the other endpoints' turn. The backlog is delivered at full speed once the load drops, or
 * after MAX_YIELD_MS of yielding with a backlog (until the load has been gone for QUIET_MS).
 */
export const YIELDING: PassLimits = { events: 8, starts: 8, perEndpoint: 4, perTeam: 8 };
export const YIELD_WINDOW_MS = 100;
export const MAX_YIELD_MS = 30_000;
const QUIET_MS = 1_000;

/** An attempt this dispatcher started; `exchanging` until the exchange with the endpoint ends. */
interface InFlightAttempt {
  delivery: DeliveryRecord;
  exchanging: boolean;
  done: Promise<void>;
}

/** The attempt slots a pass has left: in all, and per endpoint and team. */
interface Slots {
  free: number;
  taken: RoomCounter;
}

export interface DispatcherOptions {
  store: Store;
  clock: Clock;
  guard: AddressGuard;
  secrets: WebhookSecretBox;
  logger: Logger;
  /** How often the store is polled for due work (other daemons' events, retries). */
  pollIntervalMs?: number;
  /**
   * Length of a claim (CONSENT_WEBHOOK_LEASE_MS); default LEASE_MS. A lease shorter than an
   * attempt can last (15 s) lets another daemon take over a live attempt and send it twice.
   */
  leaseMs?: number;
  /** How long one attempt may take; default DELIVERY_TIMEOUT_MS (webhook-sender.ts). */
  deliveryTimeoutMs?: number;
  /** Jitter source of the retry schedule. */
  random?: () => number;
  /** The daemon's load: while busy, deliveries yield to the calls (LoadGauge). */
  load?: Load;
}

/** The secrets that sign an attempt at `now`: the current one, plus the previous during a rotation. */
export function signingSecrets(
  endpoint: WebhookEndpointRecord,
  secrets: WebhookSecretBox,
  now: Date,
): string[] {
  const { sealedSecret, sealedPreviousSecret } = withoutExpiredPreviousSecret(endpoint, now);
  const previous = sealedPreviousSecret === undefined ? [] : [secrets.open(sealedPreviousSecret)];
  return [secrets.open(sealedSecret), ...previous];
}

/**
 * Delivers webhook events, at least once, from the store's outbox (docs/webhooks.md). Runs beside the RPC
 * server, never on a visitor's request: it polls the store, and appends in this process wake it.
 * Every claim is a lease in the store, so any number of daemons on one store share the work
 * without sending one attempt twice, and work held by a daemon that died is picked up when its
 * lease ends.
 */
export class WebhookDispatcher {
  private readonly owner = `dispatcher-${randomUUID()}`;
  private running = false;
  private loop: Promise<void> | undefined;
  /** Ends the idle wait early (a nudge). */
  private wake: (() => void) | undefined;
  /** Ends any wait at once (stop). */
  private halt: (() => void) | undefined;
  private woken = false;
  private unsubscribe: (() => void) | undefined;
  /**
   * Attempts started and not yet recorded, by delivery id: a claim of a delivery already in
   * flight here is never sent twice. Those still exchanging with their endpoint count against
   * the endpoint's and the team's share (roomOf).
   */
  private readonly inFlight = new Map<string, InFlightAttempt>();
  /** The last pass filled every free slot: more may be due once an attempt ends. */
  private full = false;
  private agents = new DeliveryAgents();
  /** When yielding began, unless the load has since been gone for QUIET_MS (dispatcher clock, ms). */
  private yieldingSince: number | undefined;
  /** Since when the load has been gone, while yieldingSince is set. */
  private quietSince: number | undefined;
  /** Yielded for MAX_YIELD_MS: full speed until a pass finds the backlog gone. */
  private catchingUp = false;
  /** The last pass yielded: the next waits YIELD_WINDOW_MS. */
  private yielded = false;

  /**
   * A pass's failure, by each cause (storeFailureLog): the store out of reach once in a while as
   * it lasts, at warn; a full disk not at all (the store's guard reports it once); any other, an
   * error, at once when its words are new, else once in a while as it repeats (a damaged store).
   */
  private readonly logStoreFailure: (error: unknown, details?: object) => void;

  constructor(private readonly options: DispatcherOptions) {
    this.logStoreFailure = storeFailureLog(options.store, options.logger, {
      unavailable: "the store cannot be reached; webhook deliveries wait until it can",
      failed: "webhook dispatch pass failed",
    });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = onOutboxEvent(this.options.store, () => this.nudge());
    this.loop = this.run();
  }

  /** Stops polling and waits for the attempts in flight to finish. */
  async stop(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    this.halt?.();
    await this.loop;
    while (this.inFlight.size > 0) {
      await Promise.all(Array.from(this.inFlight.values(), (running) => running.done));
    }
    this.agents.destroy();
    this.agents = new DeliveryAgents();
  }

  /** Runs the next pass now instead of after the poll interval. */
  nudge(): void {
    this.woken = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    const interval = this.options.pollIntervalMs ?? 1_000;
    while (this.running) {
      this.woken = false;
      let worked = 0;
      try {
        worked = await this.runOnce();
      } catch (error) {
        this.logStoreFailure(error);
      }
      if (!this.running) break;
      if (worked === 0 && !this.woken) {
        await this.pause(interval, true);
        if (!this.running || !this.woken) continue;
      }
      await this.pause(this.yielded ? YIELD_WINDOW_MS : BATCH_WINDOW_MS, false);
    }
  }

  /** Waits `ms`; stop() ends the wait at once, and so does a nudge when `nudgeable`. */
  private pause(ms: number, nudgeable: boolean): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        this.halt = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.halt = done;
      if (nudgeable) this.wake = done;
    });
  }

  /**
   * One pass: fans out pending events, then starts the due attempts that fit beside those in
   * flight. Returns how much it did.
   */
  async runOnce(): Promise<number> {
    const { store, clock } = this.options;
    this.yielded = this.yielding();
    const limits = this.yielded ? YIELDING : FULL_SPEED;
    const events = await store.webhooks.claimEvents(this.lease(), clock(), limits.events);
    // Concurrent fan-outs: the embedded store commits them together. The free attempt slots go
    // to their deliveries first, stored leased and attempted at once, without a claim.
    const slots: Slots = {
      free: Math.min(limits.starts, MAX_IN_FLIGHT - this.inFlight.size),
      taken: new RoomCounter(this.roomOf(limits)),
    };
    // Every fan-out runs to its end; the pass fails with each failure among them (settleAll).
    await settleAll(events.map((event) => this.fanOut(event, slots)));
    const free = Math.max(0, Math.min(slots.free, MAX_IN_FLIGHT - this.inFlight.size));
    // An endpoint gets no more attempts in flight than it has connections (fewer while
    // yielding), a team no more than its share; the rest wait their turn in the store, so slow
    // endpoints never hold every slot.
    const due =
      free > 0
        ? await store.webhooks.claimDeliveries(this.lease(), clock(), free, this.roomOf(limits))
        : [];
    this.full = free === 0 || due.length === free;
    // Caught up: fewer events than asked for and fewer deliveries than there was room for (or no
    // room at all: every slot is held by attempts in flight, yielding or not).
    const caughtUp = events.length < limits.events && (free === 0 || due.length < free);
    if (this.catchingUp && caughtUp) this.catchingUp = false;
    for (const delivery of due) this.track(delivery);
    return events.length + due.length;
  }

  /**
   * Whether this pass yields to the daemon's calls: while the load is busy, for at most
   * MAX_YIELD_MS; then the backlog goes out at full speed before yielding again. A short dip in
   * the load does not restart the MAX_YIELD_MS: only QUIET_MS without load does.
   */
  private yielding(): boolean {
    if (this.catchingUp) return false;
    const now = this.options.clock().getTime();
    if (!this.options.load?.busy()) {
      this.quietSince ??= now;
      if (now - this.quietSince >= QUIET_MS) this.yieldingSince = undefined;
      return false;
    }
    this.quietSince = undefined;
    this.yieldingSince ??= now;
    if (now - this.yieldingSince < MAX_YIELD_MS) return true;
    this.catchingUp = true;
    this.yieldingSince = undefined;
    return false;
  }

  /**
   * Runs an attempt beside the passes; a slot freed after a full pass wakes the loop. Nothing
   * starts once the dispatcher is stopping: its lease runs out instead. A delivery claimed while
   * its attempt here is still running is either claimed again mid-attempt (after a lease shorter
   * than the attempt: not sent again, the running attempt records it) or claimed after that
   * attempt recorded its outcome, while the endpoint's failure record is still being written (a
   * slow store, or a clock moved on, let its retry fall due meanwhile): attempted once that
   * attempt ends, instead of being held unattempted until the new lease runs out.
   */
  private track(delivery: DeliveryRecord): void {
    if (!this.running) return;
    const running = this.inFlight.get(delivery.id);
    if (running) {
      if (delivery.attempts > running.delivery.attempts) {
        void running.done.then(() => this.track(delivery));
      }
      return;
    }
    // The endpoint's and the team's shares count the exchange with the endpoint, not the store
    // write that records it.
    const entry: InFlightAttempt = { delivery, exchanging: true, done: Promise.resolve() };
    this.inFlight.set(delivery.id, entry);
    entry.done = this.attempt(delivery, () => {
      entry.exchanging = false;
    })
      .catch((error: unknown) => {
        // The claim's lease runs out and the attempt is made again (at least once). The store
        // out of reach is the passes' warning, not an error per attempt.
        if (isStoreFull(error)) return;
        if (this.options.store.isUnavailable(error)) {
          this.logStoreFailure(error, { deliveryId: delivery.id });
          return;
        }
        this.options.logger.error(
          { err: error, deliveryId: delivery.id },
          "webhook attempt failed",
        );
      })
      .finally(() => {
        this.inFlight.delete(delivery.id);
        if (this.full && this.running) {
          this.full = false;
          this.nudge();
        }
      });
  }

  /** Takes an attempt slot of this pass for the delivery, if one is free for its endpoint and team. */
  private takeSlot(slots: Slots, delivery: AttemptOwner) {
    if (slots.free <= 0 || !slots.taken.fits(delivery)) return false;
    slots.free--;
    slots.taken.take(delivery);
    return true;
  }

  /** The room this dispatcher's attempts still exchanging with their endpoints leave under `limits`. */
  private roomOf(limits: PassLimits): DeliveryRoom {
    const exchanging = [...this.inFlight.values()].filter((attempt) => attempt.exchanging);
    return {
      perEndpoint: limits.perEndpoint,
      perTeam: limits.perTeam,
      inFlight: exchanging.map((attempt) => attempt.delivery),
      shared: Math.max(0, MAX_IN_FLIGHT - this.inFlight.size - RESERVED_FOR_NEW_TEAMS),
    };
  }

  private lease() {
    const leaseMs = this.options.leaseMs ?? LEASE_MS;
    return { owner: this.owner, until: new Date(this.options.clock().getTime() + leaseMs) };
  }

  /**
   * One delivery per enabled endpoint of the team subscribed to the event and its banner. While
   * `slots` has room, a delivery is stored under this dispatcher's lease and attempted at once.
   */
  private async fanOut(row: ConsentLogRecord, slots: Slots): Promise<void> {
    const eventId = eventIdOf(row.id);
    const payload = consentGivenBody(row);
    const endpoints = await this.options.store.webhooks.listEndpoints(row.teamId);
    const lease = this.lease();
    const deliveries: DeliveryRecord[] = endpoints
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
        ...(this.takeSlot(slots, { webhookId: endpoint.id, teamId: row.teamId }) && {
          leaseOwner: lease.owner,
          leaseUntil: lease.until,
        }),
      }));
    const stored = await this.options.store.webhooks.fanOut(row.id, deliveries);
    // Only what this fan-out stored is held: a delivery stored before keeps its own state.
    for (const delivery of stored) if (delivery.leaseOwner === this.owner) this.track(delivery);
  }

  /** Makes one attempt; `sent` is called once the exchange with the endpoint is over. */
  private async attempt(delivery: DeliveryRecord, sent: () => void): Promise<void> {
    const { store, clock } = this.options;
    const endpoint = await store.webhooks.getEndpoint(delivery.teamId, delivery.webhookId);
    if (!endpoint?.enabled) {
      // Not sent: kept as a dead letter, replayable once the endpoint is enabled again.
      const reason = endpoint?.disabledReason ?? "the endpoint was removed";
      await this.complete(delivery, {
        attempts: delivery.attempts,
        status: "failed",
        lastAttemptAt: delivery.lastAttemptAt,
        lastStatusCode: delivery.lastStatusCode,
        lastError: `not sent: the endpoint is disabled (${reason})`,
        lastResponseExcerpt: delivery.lastResponseExcerpt,
      });
      return;
    }
    const at = clock();
    let outcome: SendOutcome;
    try {
      const headers = signedHeaders(
        signingSecrets(endpoint, this.options.secrets, at),
        delivery.eventId,
        at,
        delivery.payload,
      );
      outcome = await sendWebhook({
        url: endpoint.url,
        headers,
        body: delivery.payload,
        guard: this.options.guard,
        agents: this.agents,
        tenant: endpoint.teamId,
        timeoutMs: this.options.deliveryTimeoutMs,
      });
    } catch (error) {
      outcome = {
        ok: false,
        statusCode: 0,
        error: messageOf(error),
      };
    }
    sent();
    // Retries are counted from the end of the exchange: after a 15 s timeout, the first one
    // comes about 5 s later, not at once.
    const ended = clock();
    const attempts = delivery.attempts + 1;
    const observed = {
      attempts,
      lastAttemptAt: at,
      lastStatusCode: outcome.statusCode,
      lastError: outcome.error,
      lastResponseExcerpt: outcome.excerpt,
    };
    if (outcome.ok) {
      const recorded = await this.complete(delivery, {
        ...observed,
        status: "succeeded",
        succeededAt: at,
      });
      if (recorded) {
        this.options.logger.debug(
          { deliveryId: delivery.id, webhookId: delivery.webhookId, attempts },
          "webhook delivered",
        );
      }
      if (endpoint.failingSince)
        await changeEndpoint(this.options.store.webhooks, endpoint, at, (e) =>
          e.url === endpoint.url ? { ...e, failingSince: undefined } : e,
        );
      return;
    }
    // The answer tells of the URL it came from: an endpoint given another URL during the attempt
    // (an integrator moving off a receiver that now answers 410) keeps its state, and the
    // delivery its retries, which go to the new URL. The 5 days count on the stored failure
    // record, which a re-enable during the attempt has cleared.
    const current = await store.webhooks.getEndpoint(endpoint.teamId, endpoint.id);
    const sameUrl = current?.url === endpoint.url;
    const disableReason = current && sameUrl ? this.disableReason(current, outcome, at) : undefined;
    const next = disableReason
      ? null
      : nextAttemptAt(
          attempts,
          ended,
          retryAfterMs(outcome.retryAfter, ended),
          this.options.random,
        );
    await this.complete(
      delivery,
      next
        ? { ...observed, status: "pending", nextAttemptAt: next }
        : { ...observed, status: "failed" },
    );
    if (!current || !sameUrl) return;
    await changeEndpoint(this.options.store.webhooks, current, at, (e) =>
      e.url === endpoint.url
        ? {
            ...e,
            failingSince: e.failingSince ?? at,
            ...(disableReason && { enabled: false, disabledReason: disableReason, disabledAt: at }),
          }
        : e,
    );
    if (disableReason)
      this.options.logger.warn(
        { webhookId: endpoint.id, reason: disableReason },
        "webhook endpoint disabled",
      );
  }

  /** docs/webhooks.md: 410 Gone disables at once; so does a run of failures lasting five days. */
  private disableReason(
    endpoint: WebhookEndpointRecord,
    outcome: SendOutcome,
    at: Date,
  ): string | undefined {
    if (outcome.statusCode === 410) return "the endpoint answered 410 Gone";
    const since = endpoint.failingSince;
    if (since && at.getTime() - since.getTime() >= FAILING_DISABLE_AFTER_MS) {
      return `every attempt failed for 5 days (since ${since.toISOString()})`;
    }
    return undefined;
  }

  /** Records the attempt's outcome under this dispatcher's claim; false when it moved on. */
  private async complete(delivery: DeliveryRecord, result: AttemptResult): Promise<boolean> {
    const stored = await this.options.store.webhooks.completeAttempt(
      delivery.id,
      this.owner,
      delivery.attempts,
      result,
    );
    if (!stored) {
      // An endpoint removed meanwhile took its deliveries along: the operator's doing, nothing to
      // warn of. Otherwise the delivery was replayed, or another daemon took it over after a
      // lease shorter than the attempt (a duplicate send is possible): worth a warning.
      const removed = !(await this.options.store.webhooks.getEndpoint(
        delivery.teamId,
        delivery.webhookId,
      ));
      this.options.logger[removed ? "debug" : "warn"](
        { deliveryId: delivery.id },
        "webhook delivery moved on during its attempt",
      );
    }
    return stored;
  }
}
