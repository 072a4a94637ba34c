import { createHmac } from "node:crypto";
import { isIPv4 } from "node:net";
import ipaddr from "ipaddr.js";
import type { Clock } from "#daemon/clock.js";
import { DomainError, type LockedOutAddress, type RateLimitState } from "#daemon/errors.js";
import type { CounterStore } from "#daemon/limits/counter-store.js";
import { boundedMemo } from "#daemon/memo.js";

/** spec 8: the fixed API-key window. */
export const KEY_WINDOW_MS = 15 * 60_000;
/** spec 8: failed authentication attempts are counted per minute. */
export const MINUTE_MS = 60_000;

/** spec 8: requests per 15-minute window for each key, by plan. */
export const PLAN_LIMITS: Readonly<Record<string, number>> = {
  free: 50,
  starter: 200,
  professional: 500,
  business: 2_000,
  enterprise: 5_000,
};

/** spec 8: an unmapped plan falls back to the Free limit. */
export function planLimit(plan: string): number {
  return PLAN_LIMITS[plan] ?? (PLAN_LIMITS.free as number);
}

export interface LimitOutcome {
  allowed: boolean;
  state: RateLimitState;
  retryAfterSeconds: number;
}

/**
 * Fixed-window counters aligned to the clock (decisions §2: window start = floor(now / window)).
 * Counts live in the shared store, so every daemon on one store enforces one limit.
 */
export class FixedWindowLimiter {
  constructor(
    private readonly counters: CounterStore,
    private readonly clock: Clock,
  ) {}

  /** Counts one request against `bucket` and reports whether it is within `limit`. */
  async hit(bucket: string, limit: number, windowMs: number): Promise<LimitOutcome> {
    const now = this.clock().getTime();
    const { name, resetAtMs } = windowOf(bucket, windowMs, now);
    const count = await this.counters.increment(
      name,
      new Date(resetAtMs + windowMs),
      new Date(now),
    );
    return outcome(count, limit, resetAtMs, now);
  }

  /** How many requests `bucket` has used in the current window, without counting one. */
  async used(bucket: string, windowMs: number): Promise<{ count: number; resetAtMs: number }> {
    const now = this.clock();
    const { name, resetAtMs } = windowOf(bucket, windowMs, now.getTime());
    return { count: await this.counters.get(name, now), resetAtMs };
  }

  /** Counts one event (for example a failed authentication) without a verdict. */
  async record(bucket: string, windowMs: number): Promise<void> {
    const now = this.clock().getTime();
    const { name, resetAtMs } = windowOf(bucket, windowMs, now);
    await this.counters.increment(name, new Date(resetAtMs + windowMs), new Date(now));
  }
}

function windowOf(bucket: string, windowMs: number, now: number) {
  const start = Math.floor(now / windowMs) * windowMs;
  return { name: `${bucket}:${start}`, resetAtMs: start + windowMs };
}

function outcome(count: number, limit: number, resetAtMs: number, now: number): LimitOutcome {
  return {
    allowed: count <= limit,
    state: { limit, remaining: Math.max(0, limit - count), resetAtMs },
    retryAfterSeconds: retryAfterSeconds(resetAtMs, now),
  };
}

/** Whole seconds until the window resets, at least 1. */
export function retryAfterSeconds(resetAtMs: number, now: number): number {
  return Math.max(1, Math.ceil((resetAtMs - now) / 1000));
}

/**
 * spec 7: 429 rate_limited with Retry-After. `what` says which limit, when it is not the
 * caller's own request limit (failed attempts from the caller's address, whose address
 * `lockedOut` says).
 */
export function rateLimited(
  retryAfter: number,
  {
    state,
    what = "Rate limit exceeded",
    lockedOut,
  }: { state?: RateLimitState; what?: string; lockedOut?: LockedOutAddress } = {},
): DomainError {
  return new DomainError(
    "rate_limited",
    "rate_limited",
    `${what}; retry in ${retryAfter} second${retryAfter === 1 ? "" : "s"}`,
    {
      retryAfterSeconds: retryAfter,
      rateLimit: state,
      lockedOut,
    },
  );
}

/**
 * The client a per-IP counter counts: an IPv4 address (also when written IPv4-mapped,
 * `::ffff:192.0.2.1`), or an IPv6 address's /64, the block one subscriber or host is given
 * (RFC 6177), so stepping through the addresses of one's own /64 is still one client. Anything
 * that is not an address (the relay's "unknown") is its own client.
 */
export function clientOfIp(ip: string): string {
  // Most clients: an IPv4 address as Node and X-Forwarded-For write it, with no parse at all.
  if (isIPv4(ip)) return ip;
  if (!ipaddr.IPv6.isValid(ip)) return ip;
  const v6 = ipaddr.IPv6.parse(ip);
  // ipaddr.js reads the IPv4-compatible form (::192.0.2.7, RFC 4291 deprecated) as IPv4-mapped;
  // that address is ::c000:207, an IPv6 one, while every way to write a mapped one has its ffff.
  const written = ip.split("%")[0] ?? ip; // the address without its zone
  if (v6.isIPv4MappedAddress() && /ffff/i.test(written)) return v6.toIPv4Address().toString();
  const parts = v6.parts.slice(0, 4);
  return `${parts.map((part) => part.toString(16)).join(":")}::/64`;
}

/**
 * Turns a client IP into a counter-name component: an HMAC under a server secret of the client
 * it counts as (clientOfIp), so counters never hold a raw address (decisions §2) and a store dump
 * cannot be reversed by enumerating IPs.
 */
export class ClientIpHasher {
  /**
   * Addresses hashed lately, in this process's memory only (never stored): an integrator's
   * backend calls from a few addresses, and an HMAC per request was about a tenth of a resolve's
   * CPU. Emptied whenever it reaches MAX_REMEMBERED, so it stays small under a flood of addresses.
   */
  readonly hash: (ip: string) => string;

  constructor(secret: Buffer) {
    this.hash = boundedMemo(MAX_REMEMBERED, (ip: string) =>
      createHmac("sha256", secret).update(clientOfIp(ip)).digest("base64url").slice(0, 22),
    );
  }
}

/** At most this many addresses are remembered by a ClientIpHasher. */
const MAX_REMEMBERED = 4_096;
