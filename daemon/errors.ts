import type { JsonObject } from "@bufbuild/protobuf";

/** How a domain failure is classified; the RPC edge maps each to one gRPC code. */
export type FailureKind =
  | "invalid"
  | "too_large"
  | "unauthenticated"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "failed_precondition"
  | "rate_limited"
  | "unavailable";

/** One violated validation rule (spec 7: `details` is an array of objects with `message`). */
export interface Violation {
  field: string;
  message: string;
}

export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Unix milliseconds of the window reset. */
  resetAtMs: number;
}

/** A subject snapshot as carried by a conflict (spec 4.6). */
export interface ConflictSnapshot {
  consentState: JsonObject;
  protocolVersion: number;
  version: number;
  clientUpdatedAt: string;
  updatedAt: Date;
  expiresAt: Date;
}

export interface FailureExtras {
  details?: Violation[];
  rateLimit?: RateLimitState;
  retryAfterSeconds?: number;
  current?: ConflictSnapshot;
}

/**
 * A failure the daemon raises on purpose, with the machine code of spec section 7. Services throw
 * these; the RPC edge (rpc/connect-errors.ts) is the one place that turns them into ConnectErrors.
 */
export class DomainError extends Error {
  constructor(
    readonly kind: FailureKind,
    /** Machine code; empty for banner validation failures, which spec 7 leaves without one. */
    readonly code: string,
    message: string,
    readonly extras: FailureExtras = {},
  ) {
    super(message);
    this.name = "DomainError";
  }

  /** A copy carrying the rate-limit figures, for failures raised after the limiter ran. */
  withRateLimit(rateLimit: RateLimitState | undefined): DomainError {
    if (!rateLimit || this.extras.rateLimit) return this;
    return new DomainError(this.kind, this.code, this.message, { ...this.extras, rateLimit });
  }
}

/** spec 7: 400 invalid_request with one detail per violated field. */
export function invalidRequest(
  details: Violation[],
  message = "Request validation failed",
): DomainError {
  return new DomainError("invalid", "invalid_request", message, { details });
}

/** spec 7: 404 not_found. */
export function notFound(message: string): DomainError {
  return new DomainError("not_found", "not_found", message);
}
