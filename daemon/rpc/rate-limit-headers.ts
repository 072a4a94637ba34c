import type { HandlerContext } from "@connectrpc/connect";
import type { Authenticator, Authorized, Requirement } from "#daemon/auth/authenticator.js";
import type { Scope } from "#daemon/auth/scopes.js";
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

/**
 * A service's gate: authorizes the call (decisions §2 check order) with the read or the write
 * scope, then runs the operation under afterAdmission.
 */
export function admission(
  authenticator: Authenticator,
  scopes: { read: Scope; write: Scope },
  requirement: Omit<Requirement, "scope" | "write"> = {},
) {
  return async <T>(
    ctx: HandlerContext,
    write: boolean,
    operation: (auth: Authorized) => Promise<T>,
  ): Promise<T> => {
    const auth = await authenticator.authorize(ctx, {
      ...requirement,
      scope: write ? scopes.write : scopes.read,
      write,
    });
    return afterAdmission(ctx, auth, () => operation(auth));
  };
}
