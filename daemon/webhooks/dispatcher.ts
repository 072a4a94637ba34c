import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { Clock } from "#daemon/clock.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { isStoreFull } from "#daemon/store/disk-guard.js";
import type { Store } from "#daemon/store/store.js";
import { settleAll, storeFailureLog } from "#daemon/store/store-failures.js";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { DeliveryAttempts } from "#daemon/webhooks/delivery-attempt.js";
import type { Load } from "#daemon/webhooks/load-gauge.js";
import { consentGivenDeliveries, onOutboxEvent } from "#daemon/webhooks/outbox.js";
import {
  FULL_SPEED,
  type InFlightAttempt,
  LoadPace,
  roomOf,
  type Slots,
  takeSlot,
  YIELD_WINDOW_MS,
  YIELDING,
} from "#daemon/webhooks/pass-limits.js";
import type { WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { DELIVERY_TIMEOUT_MS, MAX_IN_FLIGHT } from "#daemon/webhooks/webhook-sender.js";
import { type DeliveryRecord, RoomCounter } from "#daemon/webhooks/webhook-store.js";

/** A claim outlives the longest attempt by far, so a live holder never loses it mid-send. */
export const LEASE_MS = DELIVERY_TIMEOUT_MS * 4;
/**
 * After a pass that found work, or a nudge, the next pass waits this long, so the events appended
 * meanwhile are claimed and fanned out together: a few store commits per batch instead of three
 * per event, which every append (and every other daemon's append) would otherwise queue behind.
 */
export const BATCH_WINDOW_MS = 10;

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
  private readonly attempts: DeliveryAttempts;
  private readonly pace: LoadPace;
  /** The last pass yielded: the next waits YIELD_WINDOW_MS. */
  private yielded = false;
  /** The stop under way, once asked for. */
  private stopping: Promise<void> | undefined;
  /** The stop has ended: nothing is in flight, and no cut is pending. */
  private stopped = false;
  /** When the attempts still in flight are cut (stop's `cutAfterMs`). */
  private cutTimer: NodeJS.Timeout | undefined;
  /** The cut under way: its attempts are recorded or given back, then counted in the log. */
  private cutting: Promise<void> | undefined;
  /**
   * The stop has cleared its cut timer (nothing is in flight) and is waiting for a cut under way
   * to end: a stop asked from now on sets no timer, none being left to clear it.
   */
  private cutClosed = false;
  /** Set by start(), cleared by stop(): whether a start waiting for a stop's end goes ahead. */
  private wanted = false;

  /**
   * A pass's failure, by each cause (storeFailureLog): the store out of reach once in a while as
   * it lasts, at warn; a full disk not at all (the store's guard reports it once); any other, an
   * error, at once when its words are new, else once in a while as it repeats (a damaged store).
   */
  private readonly logStoreFailure: (error: unknown, details?: object) => void;

  constructor(private readonly options: DispatcherOptions) {
    this.attempts = new DeliveryAttempts({ ...options, owner: this.owner });
    this.pace = new LoadPace(options.clock, options.load);
    this.logStoreFailure = storeFailureLog(options.store, options.logger, {
      unavailable: "the store cannot be reached; webhook deliveries wait until it can",
      failed: "webhook dispatch pass failed",
    });
  }

  /**
   * Starts polling the store and making attempts. Asked while a stop is under way, it starts once
   * that stop has ended (its attempts recorded or given back, its connections closed), so the
   * stop's end never marks the restarted dispatcher stopped and its loop never runs beside the
   * stopping one; a stop asked meanwhile wins: the last of start() and stop() decides. Resolves
   * once the dispatcher runs, or once such a later stop has won.
   */
  start(): Promise<void> {
    this.wanted = true;
    if (this.stopping && !this.stopped) {
      return this.stopping.then(() => {
        if (this.wanted) this.begin();
      });
    }
    this.begin();
    return Promise.resolve();
  }

  private begin(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = undefined;
    this.stopped = false;
    this.cutClosed = false;
    this.unsubscribe = onOutboxEvent(this.options.store, () => this.nudge());
    this.loop = this.run();
  }

  /**
   * Stops polling and waits for the attempts in flight to finish. Claims that come in meanwhile
   * (a pass under way, a fan-out) are given back unattempted. With `cutAfterMs` (a shutdown's
   * limit), the attempts still waiting on their endpoints that long from now, unless the stop has
   * ended by then, are cut: each gives its delivery back as if it had not been made
   * (DeliveryAttempts.release): pending, due at once, its attempts and the endpoint's failure
   * record unchanged, its lease released, so another daemon, or this one after its restart, sends
   * it again at once.
   */
  stop({ cutAfterMs }: { cutAfterMs?: number } = {}): Promise<void> {
    this.wanted = false;
    // A stop past its cut timer's clearing (its last wait, or its end) has nothing left to cut: a
    // timer set now would only keep the process alive that long, then cut the attempts of a
    // dispatcher started again meanwhile.
    if (cutAfterMs !== undefined && !this.cutClosed) {
      clearTimeout(this.cutTimer);
      this.cutTimer = setTimeout(() => {
        this.cutting = this.cutInFlight();
      }, cutAfterMs);
    }
    this.stopping ??= this.stopAndWait();
    return this.stopping;
  }

  /**
   * Ends the exchanges still in flight (stop's `cutAfterMs`), then says how many were cut: those
   * given back because their endpoints had not answered. One whose status had arrived, its body
   * still being read, is recorded with that status (DeliveryAttempts.cut), and is not counted.
   */
  private async cutInFlight(): Promise<void> {
    const exchanging = [...this.inFlight.values()].filter((attempt) => attempt.exchanging);
    this.attempts.cut();
    await Promise.all(exchanging.map((attempt) => attempt.done));
    const cut = exchanging.filter((attempt) => attempt.givenBack).length;
    if (cut > 0) {
      this.options.logger.info(
        { attempts: cut },
        "webhook attempts cut by the shutdown: those their endpoints had not answered are due again at once",
      );
    }
  }

  private async stopAndWait(): Promise<void> {
    this.running = false;
    this.unsubscribe?.();
    this.halt?.();
    await this.loop;
    while (this.inFlight.size > 0) {
      await Promise.all(Array.from(this.inFlight.values(), (running) => running.done));
    }
    clearTimeout(this.cutTimer);
    this.cutClosed = true;
    // A cut that ran logs its count before the stop ends (and the process exits).
    await this.cutting;
    this.cutting = undefined;
    this.stopped = true;
    this.attempts.closeConnections();
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
    this.yielded = this.pace.yielding();
    const limits = this.yielded ? YIELDING : FULL_SPEED;
    const events = await store.webhooks.claimEvents(this.lease(), clock(), limits.events);
    // Concurrent fan-outs: the embedded store commits them together. The free attempt slots go
    // to their deliveries first, stored leased and attempted at once, without a claim.
    const slots: Slots = {
      free: Math.min(limits.starts, MAX_IN_FLIGHT - this.inFlight.size),
      taken: new RoomCounter(roomOf(limits, this.inFlight)),
    };
    // Every fan-out runs to its end; the pass fails with each failure among them (settleAll).
    await settleAll(events.map((event) => this.fanOut(event, slots)));
    const free = Math.max(0, Math.min(slots.free, MAX_IN_FLIGHT - this.inFlight.size));
    // An endpoint gets no more attempts in flight than it has connections (fewer while
    // yielding), a team no more than its share; the rest wait their turn in the store, so slow
    // endpoints never hold every slot.
    const due =
      free > 0
        ? await store.webhooks.claimDeliveries(
            this.lease(),
            clock(),
            free,
            roomOf(limits, this.inFlight),
          )
        : [];
    this.full = free === 0 || due.length === free;
    // Caught up: fewer events than asked for and fewer deliveries than there was room for (or no
    // room at all: every slot is held by attempts in flight, yielding or not).
    const caughtUp = events.length < limits.events && (free === 0 || due.length < free);
    if (caughtUp) this.pace.caughtUp();
    for (const delivery of due) this.track(delivery);
    return events.length + due.length;
  }

  /**
   * Runs an attempt beside the passes; a slot freed after a full pass wakes the loop. Nothing
   * starts once the dispatcher is stopping: the delivery is given back at once, due as it was
   * (DeliveryAttempts.release), rather than held until its lease runs out. A delivery claimed while
   * its attempt here is still running is either claimed again mid-attempt (after a lease shorter
   * than the attempt: not sent again, the running attempt records it) or claimed after that
   * attempt recorded its outcome, while the endpoint's failure record is still being written (a
   * slow store, or a clock moved on, let its retry fall due meanwhile): attempted once that
   * attempt ends, instead of being held unattempted until the new lease runs out.
   */
  private track(delivery: DeliveryRecord): void {
    const running = this.inFlight.get(delivery.id);
    if (running) {
      if (delivery.attempts > running.delivery.attempts) {
        void running.done.then(() => this.track(delivery));
      }
      return;
    }
    // The endpoint's and the team's shares count the exchange with the endpoint, not the store
    // write that records it.
    const entry: InFlightAttempt = {
      delivery,
      exchanging: this.running,
      done: Promise.resolve(),
    };
    this.inFlight.set(delivery.id, entry);
    // Tracked either way, so stop() waits for a give-back's write before the store closes.
    const work = this.running
      ? this.attempts
          .attempt(delivery, () => {
            entry.exchanging = false;
          })
          .then((end) => {
            entry.givenBack = end === "given back";
          })
      : this.attempts.release(delivery);
    entry.done = work
      .catch((error: unknown) => {
        // The claim's lease runs out and the attempt is made again (at least once). The store
        // out of reach is the passes' warning, not an error per attempt.
        if (isStoreFull(error)) return;
        if (this.options.store.unavailability(error)) {
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

  private lease() {
    const leaseMs = this.options.leaseMs ?? LEASE_MS;
    return { owner: this.owner, until: new Date(this.options.clock().getTime() + leaseMs) };
  }

  /**
   * One delivery per enabled endpoint of the team subscribed to the event and its banner. While
   * `slots` has room, a delivery is stored under this dispatcher's lease and attempted at once.
   */
  private async fanOut(row: ConsentLogRecord, slots: Slots): Promise<void> {
    const endpoints = await this.options.store.webhooks.listEndpoints(row.teamId);
    const lease = this.lease();
    const deliveries = consentGivenDeliveries(row, endpoints).map((delivery) =>
      takeSlot(slots, delivery)
        ? { ...delivery, leaseOwner: lease.owner, leaseUntil: lease.until }
        : delivery,
    );
    const stored = await this.options.store.webhooks.fanOut(row.id, deliveries);
    // Only what this fan-out stored is held: a delivery stored before keeps its own state.
    for (const delivery of stored) if (delivery.leaseOwner === this.owner) this.track(delivery);
  }
}
