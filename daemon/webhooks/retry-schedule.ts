/**
 * Delays before each retry (docs/webhooks.md, after Svix and Stripe): about 5 s, 5 min, 30 min, 2 h, 5 h,
 * 10 h and 10 h. The first attempt is immediate, so a delivery has at most 8 attempts (~28 h).
 */
export const RETRY_DELAYS_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const;

/** Each delay is moved by up to ±10 %, so endpoints that failed together do not retry together. */
export const JITTER = 0.1;

/** A Retry-After longer than this is treated as this (a receiver cannot park events for weeks). */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** The furthest ahead of its attempt nextAttemptAt() ever puts the next one. */
export const LONGEST_RETRY_WAIT_MS = Math.max(
  Math.max(...RETRY_DELAYS_MS) * (1 + JITTER),
  MAX_RETRY_AFTER_MS,
);

/**
 * When the attempt after attempt number `attempts` (1-based) is due, or null when the schedule is
 * exhausted (the delivery becomes a dead letter). `retryAfterMs` from the response is honoured when
 * it asks for a longer wait than the schedule.
 */
export function nextAttemptAt(
  attempts: number,
  at: Date,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): Date | null {
  const delay = RETRY_DELAYS_MS[attempts - 1];
  if (delay === undefined) return null;
  const jittered = delay * (1 - JITTER + 2 * JITTER * random());
  const wait = Math.max(jittered, Math.min(retryAfterMs ?? 0, MAX_RETRY_AFTER_MS));
  return new Date(at.getTime() + Math.round(wait));
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, now: Date): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now.getTime());
}
