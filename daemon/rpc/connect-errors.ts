import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { boundedDetails, clipped, DomainError, type FailureKind } from "#daemon/errors.js";
import { type ErrorLogger, repeatedFailureLog } from "#daemon/logging.js";
import { callerFault } from "#daemon/rpc/parse-failures.js";
import { rateLimitHeaders } from "#daemon/rpc/rate-limit-headers.js";
import { STORE_FULL_METADATA, StoreFullError } from "#daemon/store/disk-guard.js";
import type { Store, StoreUnavailability } from "#daemon/store/store.js";
import { unavailableLog } from "#daemon/store/store-failures.js";
import {
  ErrorInfoSchema,
  LockedOutAddress,
  OperatorTokenRefusal,
} from "#gen/consent/v1/errors_pb.js";

/** decisions §7: the gRPC code of each kind of failure. */
const CODE_OF_KIND: Record<FailureKind, Code> = {
  invalid: Code.InvalidArgument,
  too_large: Code.ResourceExhausted,
  unauthenticated: Code.Unauthenticated,
  forbidden: Code.PermissionDenied,
  not_found: Code.NotFound,
  conflict: Code.Aborted,
  failed_precondition: Code.FailedPrecondition,
  rate_limited: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
};

/** How ErrorInfo names whose address a failed-authentication lockout holds. */
const LOCKED_OUT_ADDRESS = {
  "relayed client": LockedOutAddress.RELAYED_CLIENT,
  caller: LockedOutAddress.CALLER,
} as const;

/** How ErrorInfo names which place of the operator token a call fails. */
const OPERATOR_TOKEN_REFUSAL = {
  "wrong gateway token": OperatorTokenRefusal.WRONG_GATEWAY_TOKEN,
  "bearer needed": OperatorTokenRefusal.BEARER_NEEDED,
} as const;

/** The single translation of a DomainError into a ConnectError carrying an ErrorInfo detail. */
export function toConnectError(error: DomainError): ConnectError {
  const { details, rateLimit, retryAfterSeconds, current, lockedOut, operatorTokenRefusal } =
    error.extras;
  const info = create(ErrorInfoSchema, {
    code: error.code,
    details: boundedDetails(details ?? []),
    retryAfterSeconds: retryAfterSeconds ?? 0,
    rateLimit: rateLimit && {
      limit: rateLimit.limit,
      remaining: rateLimit.remaining,
      resetAtMs: BigInt(rateLimit.resetAtMs),
    },
    current: current && {
      consentState: current.consentState,
      protocolVersion: current.protocolVersion,
      version: current.version,
      clientUpdatedAt: current.clientUpdatedAt,
      updatedAt: timestampFromDate(current.updatedAt),
      expiresAt: timestampFromDate(current.expiresAt),
    },
    lockedOutAddress: lockedOut && LOCKED_OUT_ADDRESS[lockedOut],
    operatorTokenRefusal: operatorTokenRefusal && OPERATOR_TOKEN_REFUSAL[operatorTokenRefusal],
  });
  const metadata = new Headers(rateLimit ? rateLimitHeaders(rateLimit) : undefined);
  if (retryAfterSeconds) metadata.set("retry-after", String(retryAfterSeconds));
  return new ConnectError(
    clipped(error.message),
    CODE_OF_KIND[error.kind],
    metadata,
    [{ desc: ErrorInfoSchema, value: info }],
    error,
  );
}

/** Node's failures of a write to a stream its caller has closed or reset. */
const CALLER_GONE = new Set([
  "ERR_HTTP2_INVALID_STREAM",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_WRITE_AFTER_END",
]);

/** decisions §7: an internal failure carries its machine code too, and nothing else of itself. */
const INTERNAL_ERROR_INFO = [
  { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { code: "internal_error" }) },
];

/**
 * Server interceptor at the RPC edge: domain failures become ConnectErrors with ErrorInfo; any
 * other error is logged with its stack and leaves as a bare "internal error", so no internal text
 * reaches a client. A server-streaming handler fails while its messages are read, so the
 * messages of a stream pass through the same translation. A streaming call's request message is
 * parsed there too: one that connect-es cannot read is the caller's error, `invalid_argument`
 * with its ErrorInfo, as parse-failures.ts answers it for unary calls. A store that cannot be reached for now (a
 * MongoDB election, the store's `unavailability`) fails the call with `unavailable` and the
 * outage's Retry-After, which clients retry (spec 7), logged at most once per
 * REPEATED_FAILURE_LOG_MS, in the store's own words where only the operator can end it (its
 * `warning`, unavailableLog); so is a call that met
 * the embedded store's damage (`internal`, as any other failure), which was logged when first met.
 */
export function domainErrorInterceptor(
  logger: ErrorLogger,
  store: Pick<Store, "unavailability" | "isDamage">,
): Interceptor {
  const logUnavailable = unavailableLog(
    logger,
    "the store cannot be reached; calls fail with unavailable until it can",
  );
  const logDamage = repeatedFailureLog(
    logger,
    "the embedded store is damaged; calls that meet a damaged page fail with internal",
    { level: "error" },
  );
  const unavailable = (outage: StoreUnavailability, procedure: string): ConnectError => {
    logUnavailable(outage, { procedure });
    return toConnectError(
      new DomainError(
        "unavailable",
        "unavailable",
        "The store is temporarily unavailable; retry later",
        { retryAfterSeconds: outage.retryAfterSeconds },
      ),
    );
  };
  return (next) => async (request) => {
    const translate = (error: unknown): ConnectError => {
      if (error instanceof DomainError) return toConnectError(error);
      const refused = callerFault(error);
      if (refused) return refused;
      const outage = store.unavailability(error);
      if (outage) return unavailable(outage, request.method.name);
      // A full disk: the guard has reported it once; a log entry per refused write would only
      // add to what fills the disk.
      if (error instanceof StoreFullError) {
        return new ConnectError(
          "internal error",
          Code.Internal,
          { [STORE_FULL_METADATA]: "1" },
          INTERNAL_ERROR_INFO,
          error,
        );
      }
      if (
        error instanceof ConnectError &&
        error.code !== Code.Internal &&
        error.code !== Code.Unknown
      )
        return error;
      // A request stream that ended before its message was whole: the caller left, or stalled
      // past the port's arrival bound (daemon/server.ts). The call is over and nothing failed here.
      const nodeCode = (error as { code?: unknown }).code;
      if (nodeCode === "ERR_STREAM_PREMATURE_CLOSE") {
        return new ConnectError("the request ended before it was complete", Code.Canceled);
      }
      // A server stream's message written after its caller left (a tail or an export cancelled,
      // its stream reset): connect-es hands the write's failure to the stream's messages, and
      // the call is over as the caller chose.
      if (typeof nodeCode === "string" && CALLER_GONE.has(nodeCode)) {
        return new ConnectError("the caller ended the call", Code.Canceled);
      }
      // A store read stopped by the call's cancellation (ReadCancellation) fails with its
      // signal's reason, which connect-es leaves a DOMException for a stream closed without a
      // reset code: the call is over as its caller, deadline or shutdown ended it.
      if (request.signal.aborted && error === request.signal.reason) {
        return ConnectError.from(error, Code.Canceled);
      }
      if (store.isDamage(error)) logDamage(error, { procedure: request.method.name });
      else {
        logger.error(
          { err: error, procedure: request.method.name },
          "unexpected error in RPC handler",
        );
      }
      return new ConnectError(
        "internal error",
        Code.Internal,
        undefined,
        INTERNAL_ERROR_INFO,
        error,
      );
    };
    let response: Awaited<ReturnType<typeof next>>;
    try {
      response = await next(request);
    } catch (error) {
      throw translate(error);
    }
    if (!response.stream) return response;
    const messages = response.message;
    return {
      ...response,
      message: (async function* () {
        try {
          yield* messages;
        } catch (error) {
          throw translate(error);
        }
      })(),
    };
  };
}
