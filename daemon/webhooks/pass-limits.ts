import type { Clock } from "#daemon/clock.js";
import type { Load } from "#daemon/webhooks/load-gauge.js";
import { ATTEMPTS_PER_ENDPOINT, MAX_IN_FLIGHT } from "#daemon/webhooks/webhook-sender.js";
import type {
  AttemptOwner,
  DeliveryRecord,
  DeliveryRoom,
  RoomCounter,
} from "#daemon/webhooks/webhook-store.js";

/**
 * What one pass of the dispatcher may take on: events claimed, attempts started (never more than
 * MAX_IN_FLIGHT in flight in all), and attempts in flight to one endpoint and for one team.
 */
export interface PassLimits {
  events: number;
  starts: number;
  perEndpoint: number;
  perTeam: number;
}

const EVENT_BATCH = 200;

/**
 * A team gets at most half the slots, however many endpoints it has (several slow endpoints of
 * one team cannot hold them all), and the last RESERVED_FOR_NEW_TEAMS free slots go only to
 * teams with no attempt in flight: two or more teams with slow endpoints cannot hold every slot
 * either, and a team whose deliveries are not waiting on anyone is never made to wait behind them.
 */
export const RESERVED_FOR_NEW_TEAMS = 16;
/** A pass's limits while the daemon's calls leave it the CPU. */
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

/**
 * Whether each pass yields to the daemon's calls: while the load is busy, for at most
 * MAX_YIELD_MS; then the backlog goes out at full speed (catching up) before yielding again. A
 * short dip in the load does not restart the MAX_YIELD_MS: only QUIET_MS without load does.
 */
export class LoadPace {
  /** When yielding began, unless the load has since been gone for QUIET_MS (dispatcher clock, ms). */
  private yieldingSince: number | undefined;
  /** Since when the load has been gone, while yieldingSince is set. */
  private quietSince: number | undefined;
  /** Yielded for MAX_YIELD_MS: full speed until a pass finds the backlog gone. */
  private catchingUp = false;

  constructor(
    private readonly clock: Clock,
    private readonly load: Load | undefined,
  ) {}

  /** Whether the pass starting now yields. */
  yielding(): boolean {
    if (this.catchingUp) return false;
    const now = this.clock().getTime();
    if (!this.load?.busy()) {
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

  /** A pass found no backlog: a pass catching up may yield again. */
  caughtUp(): void {
    this.catchingUp = false;
  }
}

/** The attempt slots a pass has left: in all, and per endpoint and team. */
export interface Slots {
  free: number;
  taken: RoomCounter;
}

/** An attempt a dispatcher started; `exchanging` until the exchange with the endpoint ends. */
export interface InFlightAttempt {
  delivery: DeliveryRecord;
  exchanging: boolean;
  done: Promise<void>;
  /** Its exchange was cut before the endpoint answered, and its delivery given back. */
  givenBack?: boolean;
}

/** Takes an attempt slot of this pass for the delivery, if one is free for its endpoint and team. */
export function takeSlot(slots: Slots, delivery: AttemptOwner): boolean {
  if (slots.free <= 0 || !slots.taken.fits(delivery)) return false;
  slots.free--;
  slots.taken.take(delivery);
  return true;
}

/**
 * The room a dispatcher's attempts in flight leave under `limits`: those still exchanging with
 * their endpoints count against the endpoint's and the team's share, every one against the
 * shared slots.
 */
export function roomOf(limits: PassLimits, inFlight: Map<string, InFlightAttempt>): DeliveryRoom {
  const exchanging = [...inFlight.values()].filter((attempt) => attempt.exchanging);
  return {
    perEndpoint: limits.perEndpoint,
    perTeam: limits.perTeam,
    inFlight: exchanging.map((attempt) => attempt.delivery),
    shared: Math.max(0, MAX_IN_FLIGHT - inFlight.size - RESERVED_FOR_NEW_TEAMS),
  };
}
