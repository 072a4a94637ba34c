import type { JsonObject } from "@bufbuild/protobuf";
import { InsertContendedError } from "#daemon/store/store.js";

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

/**
 * The Retry-After of a 503 expected to pass by itself (spec 7: retry later, with backoff): the
 * store out of reach for now (an election, a lost connection, a server too busy).
 */
export const PASSING_OUTAGE_RETRY_AFTER_SECONDS = 1;

/**
 * The Retry-After of a 503 that lasts until the operator acts (no identity key: they give one and
 * restart the daemon; a MongoDB replica set that cannot provide a majority as configured: they
 * repair the set): a client is told to wait minutes, not the second of a passing outage
 * (docs/behaviour.md, "Subjects"; README, "MongoDB").
 */
export const UNTIL_OPERATOR_RETRY_AFTER_SECONDS = 300;

/**
 * The daemon's words for a tail whose read of the team's newest rows the store stopped at its
 * time limit (consent-log-reads.ts): consentctl tells that case apart by them (cli/problems.ts).
 */
export const TAIL_READ_STOPPED_MESSAGE =
  "The store did not read the tail's latest rows within its time limit; retry later";

/**
 * Whose failed authentication attempts (spec 8) hold a call back: the client address a gateway
 * relays with the operator token, or the calling connection's own address (a direct caller, or a
 * gateway whose token the daemon does not take, daemon/auth/caller.ts). A gateway tells its
 * clients' lockouts (429) from its own (gateway/token-watch.ts) by it.
 */
export type LockedOutAddress = "relayed client" | "caller";

/**
 * Which place of the operator token a call fails: its consent-gateway-token is not the operator
 * token, or an operator call lacks the operator token as its Bearer credential (after its
 * consent-gateway-token, if any, was taken). A stand-alone gateway judges its token by it
 * (gateway/token-watch.ts), not by the words, which are for people.
 */
export type OperatorTokenRefusal = "wrong gateway token" | "bearer needed";

export interface FailureExtras {
  details?: Violation[];
  rateLimit?: RateLimitState;
  retryAfterSeconds?: number;
  current?: ConflictSnapshot;
  /** For a failed-authentication lockout: whose address it holds. */
  lockedOut?: LockedOutAddress;
  /** For a refusal over the operator token: which of its places the call fails. */
  operatorTokenRefusal?: OperatorTokenRefusal;
}

/**
 * Bounds on what a failure carries back, since messages quote what the caller sent (an origin, an
 * id, a field name) and gRPC sends them in trailers, which Node refuses past 64 KB (the call would
 * end in a reset instead of its answer): each text at most ERROR_TEXT_MAX characters, and the
 * details' texts at most ERROR_DETAILS_BYTES of UTF-8 together, the rest counted in a last one.
 * Base64 in grpc-status-details-bin, and the message twice, keep that within about 30 KB.
 */
export const ERROR_TEXT_MAX = 500;
export const ERROR_DETAILS_BYTES = 16 * 1024;

/** `details` with each text clipped, as many as ERROR_DETAILS_BYTES holds, then "…and N more". */
export function boundedDetails(details: readonly Violation[]): Violation[] {
  const kept: Violation[] = [];
  let bytes = 0;
  for (const [index, { field, message }] of details.entries()) {
    const detail = { field: clipped(field), message: clipped(message) };
    bytes += Buffer.byteLength(detail.field) + Buffer.byteLength(detail.message);
    if (bytes > ERROR_DETAILS_BYTES) {
      kept.push({ field: "", message: `…and ${details.length - index} more` });
      break;
    }
    kept.push(detail);
  }
  return kept;
}

/** What an error says, whatever was thrown: a log's or a report's words for it. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** `text`, cut to `max` characters with an ellipsis, never inside a surrogate pair. */
export function clipped(text: string, max = ERROR_TEXT_MAX): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max - 1);
  return `${/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut}…`;
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

/**
 * Runs `insert`, an insert under a team's maximum that answers false when the team is at it
 * (WebhookStore.insertEndpoint, BannerStore.insert). A refusal is a 409 failed_precondition whose
 * message is `atMaximum`: the request is valid, and only a change to the team's records makes
 * room. An InsertContendedError (the insert lost the race for a place too many times in a row,
 * and stored nothing) is a 409 conflict that tells the caller to send the request again;
 * `records` names them, plural and capitalised.
 */
export async function insertWithinMaximum(
  insert: () => Promise<boolean>,
  messages: { records: string; atMaximum: string },
): Promise<void> {
  let inserted: boolean;
  try {
    inserted = await insert();
  } catch (error) {
    if (!(error instanceof InsertContendedError)) throw error;
    throw new DomainError(
      "conflict",
      "conflict",
      `${messages.records} of this team are being created concurrently; retry the request`,
    );
  }
  if (!inserted) {
    throw new DomainError("failed_precondition", "failed_precondition", messages.atMaximum);
  }
}
