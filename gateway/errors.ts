import { Code, ConnectError } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import {
  clipped,
  messageOf,
  PASSING_OUTAGE_RETRY_AFTER_SECONDS,
  UNTIL_OPERATOR_RETRY_AFTER_SECONDS,
} from "#daemon/errors.js";
import { isStoreFull } from "#daemon/store/disk-guard.js";
import { BodyBudgetExceeded } from "#gateway/body-budget.js";
import { isDaemonBusy } from "#gateway/daemon-failures.js";
import { snapshotJson } from "#gateway/json.js";
import { tokenWatchOf } from "#gateway/token-watch.js";
import { countUnreachable } from "#gateway/unreachable-log.js";
import { type ErrorInfo, ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

/** An error as an HTTP response: status, spec 7 body fields and headers. */
export interface HttpError {
  status: number;
  message: string;
  code?: string;
  details?: { field?: string; message: string }[];
  /** For version_conflict: the stored snapshot (spec 4.6). */
  current?: Record<string, unknown>;
  headers: Record<string, string>;
}

/**
 * The method a request is answered as: HEAD as GET, whose header fields it gets (RFC 9110 9.3.2),
 * `Content-Length` included, so an error text naming the method names GET for both.
 */
export function answeredAs(request: FastifyRequest): string {
  return request.method === "HEAD" ? "GET" : request.method;
}

/** A path the gateway does not serve (spec 7 not_found; decisions §6 under /api/v1/). */
export function noEndpoint(request: FastifyRequest): HttpError {
  return {
    status: 404,
    code: "not_found",
    // The path is the caller's own text, up to the server's 16 KB limit: quoted within bounds.
    message: clipped(`No endpoint at ${answeredAs(request)} ${request.url.split("?")[0]}`),
    headers: {},
  };
}

/**
 * A request refused before its route ran (gateway/request-rules.ts), with its answer: the error
 * handler of the route's family sends it in that family's shape.
 */
export class RefusedRequest extends Error {
  constructor(readonly httpError: HttpError) {
    super(httpError.message);
  }
}

/** The body of an error outside the versioned API and the log route: `{ error, code }`. */
export function plainErrorBody(error: HttpError): { error: string; code: string | undefined } {
  return { error: error.message, code: error.code };
}

/** An error outside the versioned API and the log route: `{ error, code }`, no envelope. */
export function sendPlainError(reply: FastifyReply, error: HttpError): FastifyReply {
  return reply.code(error.status).headers(error.headers).send(plainErrorBody(error));
}

/**
 * The one table from daemon failures to HTTP statuses (spec 7). RESOURCE_EXHAUSTED is 429 for a
 * rate limit and 413 for an oversized body; the ErrorInfo code tells them apart.
 */
function statusOf(code: Code, info: ErrorInfo | undefined): number {
  switch (code) {
    case Code.InvalidArgument:
      return 400;
    case Code.Unauthenticated:
      return 401;
    case Code.PermissionDenied:
      return 403;
    case Code.NotFound:
      return 404;
    case Code.Aborted:
    case Code.AlreadyExists:
    case Code.FailedPrecondition:
      return 409;
    case Code.ResourceExhausted:
      return info?.code === "rate_limited" ? 429 : 413;
    case Code.Unavailable:
      return 503;
    default:
      return 500;
  }
}

const INTERNAL: HttpError = {
  status: 500,
  code: "internal_error",
  message: "Internal server error",
  headers: {},
};

/**
 * What a route's error handler answers for `error` (httpErrorOf), having logged what the operator
 * needs: an internal failure with its error, and a call left without the daemon's answer
 * (isUnansweredCall: the daemon unreachable, a loader read unanswered, a deadline, a proxy's 503)
 * as a warning at most every 10 s (an outage fails every request; the log says so at once, then
 * every 10 s while it lasts, with how many requests failed since the previous line, and says when
 * the daemon answers again: unreachable-log.ts).
 */
export function failureOf(request: FastifyRequest, error: unknown): HttpError {
  if (tokenWatchOf(request.server.server)?.isOwnFailure(error)) return GATEWAY_REFUSED;
  const httpError = httpErrorOf(error);
  if (isLeftClientsRead(request, error)) {
    // Nothing failed: the answer goes to nobody (docs/behaviour.md, "A client that leaves").
    request.log.debug(
      { cause: messageOf(error) },
      "the client left: its daemon call was cancelled",
    );
    return httpError;
  }
  // A write refused for want of disk space was reported once by the daemon (isStoreFull).
  if (httpError.status === 500 && !isStoreFull(error)) {
    request.log.error({ err: error }, "request failed");
  } else if (isUnansweredCall(error)) {
    // The client is told only that it may retry; the operator reads what ended the calls, counted
    // (a loader request answered from the memory of a failed read included), not one line each.
    countUnreachable(request, error);
  }
  return httpError;
}

/**
 * A read cancelled because its client left before the answer (gateway/relay.ts, readOptions):
 * cancelled by the gateway, or ended by the daemon on seeing it cancelled (its signal aborted).
 * Gone is its connection closed: not the request destroyed, which Node marks once its body has
 * been read, while its client still waits for the answer.
 */
function isLeftClientsRead(request: FastifyRequest, error: unknown): boolean {
  return (
    error instanceof ConnectError &&
    error.code === Code.Canceled &&
    request.raw.socket?.destroyed === true
  );
}

/**
 * A call that ended because the daemon could not be reached or did not answer in time, or its
 * store is unavailable (the daemon's `unavailable`, decisions §7): a retry shortly may pass. The
 * loader serves a banner held in memory on these failures only (stale-if-error.ts).
 */
export function isDaemonUnavailable(error: unknown): error is ConnectError {
  return (
    error instanceof ConnectError &&
    (error.code === Code.Unavailable || error.code === Code.DeadlineExceeded)
  );
}

/**
 * The seconds a daemon that was reached asked to be left before a call is sent again, when it
 * refused the call for want of capacity at once: the Retry-After of its own `unavailable` (its
 * store out of reach or too busy, rpc/connect-errors.ts), or for a call it reset over its request
 * budget (isDaemonBusy), which asks nothing itself, the one the gateway answers it with.
 * Undefined for any other failure: the daemon out of reach or lost, a read it left unanswered, a
 * 503 of a proxy before it; how long those last, nothing says.
 */
export function daemonRetryAfterSeconds(error: unknown): number | undefined {
  if (isDaemonBusy(error)) return PASSING_OUTAGE_RETRY_AFTER_SECONDS;
  if (!isDaemonUnavailable(error)) return undefined;
  const asked = error.findDetails(ErrorInfoSchema)[0]?.retryAfterSeconds ?? 0;
  return asked > 0 ? asked : undefined;
}

/**
 * A call that ended unavailable or past its deadline other than by the daemon's own `unavailable`
 * (its store out of reach, which the daemon logs): the daemon out of reach or lost, a loader read
 * left unanswered past its bound, a proxy's 503, a deadline, a daemon or gateway shutting down;
 * but for the daemon over its request budget (an expected refusal under load, not logged).
 */
function isUnansweredCall(error: unknown): boolean {
  return isDaemonUnavailable(error) && !isDaemonsOwnRefusal(error) && !isDaemonBusy(error);
}

/** The daemon's `unavailable` with the ErrorInfo code it raises it with (rpc/connect-errors.ts). */
function isDaemonsOwnRefusal(error: ConnectError): boolean {
  return error.code === Code.Unavailable && !!error.findDetails(ErrorInfoSchema)[0]?.code;
}

/** Translates anything a route threw. Internal error text never reaches the client. */
export function httpErrorOf(error: unknown): HttpError {
  if (error instanceof ConnectError) return fromConnectError(error);
  if (error instanceof RefusedRequest) return error.httpError;
  if (error instanceof BodyBudgetExceeded) {
    return { ...unavailable(PASSING_OUTAGE_RETRY_AFTER_SECONDS), message: error.message };
  }
  const statusCode = (error as { statusCode?: unknown }).statusCode;
  if (statusCode === 413) {
    return {
      status: 413,
      code: "invalid_request",
      message: "Request body is too large",
      headers: {},
    };
  }
  if (typeof statusCode === "number" && statusCode >= 400 && statusCode < 500) {
    return {
      status: statusCode,
      code: "invalid_request",
      message: "The request could not be read",
      headers: {},
    };
  }
  return INTERNAL;
}

/**
 * The service cannot serve the client for now (spec 7: 503 unavailable), to be asked again after
 * `retryAfterSeconds`: a second where the outage passes by itself, minutes where it lasts until
 * the operator acts (docs/behaviour.md, "Subjects"), as the daemon's own 503s say.
 */
function unavailable(retryAfterSeconds: number): HttpError {
  return {
    status: 503,
    code: "unavailable",
    message: "The service is temporarily unavailable; retry later",
    headers: { "Retry-After": String(retryAfterSeconds) },
  };
}

/**
 * The daemon refuses this gateway's own token: the client is told the service is unavailable, not
 * that its key is wrong (401) or its address locked out (429), and nothing of the gateway's setup
 * (the operator learns why from the log, TokenWatch). It lasts until the operator restarts the
 * gateway with the daemon's token, so clients are asked back in minutes, not every second.
 */
const GATEWAY_REFUSED = unavailable(UNTIL_OPERATOR_RETRY_AFTER_SECONDS);

/**
 * Whether a failure is an outage the service expects to pass by itself within moments (the daemon
 * or its store out of reach, a store too busy): a 503 whose Retry-After is shorter than that of
 * one lasting until the operator acts (UNTIL_OPERATOR_RETRY_AFTER_SECONDS). A page promises a
 * visitor no sooner a recovery than its Retry-After does.
 */
export function isPassingOutage({ status, headers }: HttpError): boolean {
  const retryAfter = headers["Retry-After"];
  return (
    status === 503 &&
    retryAfter !== undefined &&
    Number(retryAfter) < UNTIL_OPERATOR_RETRY_AFTER_SECONDS
  );
}

/**
 * A daemon answer without an ErrorInfo, or one that is no failure the daemon raises on purpose (an
 * ErrorInfo without a code on anything but a banner validation failure, spec 7 "400 (none)"; a
 * gRPC code that no kind of failure maps to, rpc/connect-errors.ts, DEADLINE_EXCEEDED among them):
 * a text of connect-es, protobuf-es, Node's HTTP/2 client, a proxy or a daemon of another version.
 * Only the gateway's own sentences for it reach the client; failureOf logs the original.
 */
function unintended(error: ConnectError): HttpError {
  // The daemon could not be reached, went away, was over its request budget or did not answer in
  // time (spec 7: 5xx is retried): a retry shortly may pass, or once the daemon's own Retry-After
  // has, if it gave one.
  if (!isDaemonUnavailable(error)) return INTERNAL;
  return unavailable(daemonRetryAfterSeconds(error) ?? PASSING_OUTAGE_RETRY_AFTER_SECONDS);
}

function fromConnectError(error: ConnectError): HttpError {
  // An internal failure is told in one fixed sentence, whatever the daemon said of it.
  if (error.code === Code.Internal) return INTERNAL;
  const info = error.findDetails(ErrorInfoSchema)[0];
  if (!info || (!info.code && error.code !== Code.InvalidArgument)) return unintended(error);
  const status = statusOf(error.code, info);
  // A code with no status of its own (DEADLINE_EXCEEDED, UNIMPLEMENTED, UNKNOWN, CANCELED…): no
  // failure the daemon raises on purpose (decisions §7), answered as one without an ErrorInfo. A
  // deadline that passed is then the service briefly unavailable (503), as the loader's
  // stale-if-error and its failed reads take it (isDaemonUnavailable), not a 500.
  if (status === 500) return unintended(error);
  const headers: Record<string, string> = {};
  if (info.rateLimit) {
    headers["X-RateLimit-Limit"] = String(info.rateLimit.limit);
    headers["X-RateLimit-Remaining"] = String(info.rateLimit.remaining);
    headers["X-RateLimit-Reset"] = String(info.rateLimit.resetAtMs);
  }
  if (info.retryAfterSeconds > 0) headers["Retry-After"] = String(info.retryAfterSeconds);
  return {
    status,
    message: error.rawMessage,
    code: info.code || undefined,
    details: info.details.length
      ? info.details.map((d) =>
          d.field ? { field: d.field, message: d.message } : { message: d.message },
        )
      : undefined,
    current: info.current ? snapshotJson(info.current) : undefined,
    headers,
  };
}
