import type { HandlerContext } from "@connectrpc/connect";
import type { Authorized } from "#daemon/auth/authenticator.js";
import { DomainError, type RateLimitState } from "#daemon/errors.js";

/** spec 8: X-RateLimit-Limit, -Remaining and -Reset (Unix milliseconds). */
export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    "x-ratelimit-limit": String(state.limit),
    "x-ratelimit-remaining": String(state.remaining),
    "x-ratelimit-reset": String(state.resetAtMs),
  };
}

/**
 * Runs an operation for a caller the limiter admitted: the rate-limit figures go out as response
 * headers, and any failure raised from here on carries them too (spec 8: present on every
 * response that reached the limiter).
 */
export async function afterAdmission<T>(
  ctx: HandlerContext,
  auth: Authorized,
  operation: () => Promise<T>,
): Promise<T> {
  if (auth.rateLimit) {
    for (const [name, value] of Object.entries(rateLimitHeaders(auth.rateLimit)))
      ctx.responseHeader.set(name, value);
  }
  try {
    return await operation();
  } catch (error) {
    throw error instanceof DomainError ? error.withRateLimit(auth.rateLimit) : error;
  }
}
