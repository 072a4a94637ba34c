import { Code, ConnectError } from "@connectrpc/connect";

/** The longest delay a Node timer keeps (about 24.8 days); a longer one fires at once. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;
/** gRPC's `grpc-timeout` (PROTOCOL-HTTP2, "Timeout"): up to 8 digits and a unit. */
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;
const GRPC_TIMEOUT_UNIT_MS = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 };
/** Connect's `connect-timeout-ms`: up to 10 digits. */
const CONNECT_TIMEOUT = /^\d{1,10}$/;

type RequestHeaders = Record<string, string | string[] | undefined>;
const DEADLINE_HEADERS = ["grpc-timeout", "connect-timeout-ms"] as const;

/** A deadline header's milliseconds; undefined for none, or one connect-es refuses as malformed. */
function deadlineMs(headers: RequestHeaders, name: "grpc-timeout" | "connect-timeout-ms") {
  const value = headers[name];
  if (typeof value !== "string") return undefined;
  if (name === "connect-timeout-ms") return CONNECT_TIMEOUT.test(value) ? Number(value) : undefined;
  const [, amount, unit] = GRPC_TIMEOUT.exec(value) ?? [];
  if (amount === undefined) return undefined;
  return Number(amount) * GRPC_TIMEOUT_UNIT_MS[unit as keyof typeof GRPC_TIMEOUT_UNIT_MS];
}

/** The answer to a call whose deadline has passed, in connect-es' words for one (its signals). */
export function deadlinePassed(): ConnectError {
  return new ConnectError("the operation timed out", Code.DeadlineExceeded);
}

/**
 * The caller's deadline as the daemon takes it, from the header of the call's protocol (gRPC and
 * gRPC-Web: `grpc-timeout`; Connect: `connect-timeout-ms`). True when it has passed on arrival:
 * zero (`0n`, `0S`, `0`). The gRPC protocol's TimeoutValue is a positive integer, and gRPC's own
 * servers (grpc-go, grpc-java) cancel a call whose deadline has passed at once, so its client reads
 * DEADLINE_EXCEEDED; connect-es aborts the call's signal but runs a unary call to its end all the
 * same, its effects included, and answers OK. A deadline longer than a timer can keep
 * (`grpc-timeout: 99999999H` is valid gRPC, and some clients send it for "no deadline") would fire
 * at once and fail the call: such a deadline is dropped, and the call runs without one, as it all
 * but would.
 */
export function hasPassedDeadline(headers: RequestHeaders, grpc: boolean): boolean {
  for (const name of DEADLINE_HEADERS) {
    const ms = deadlineMs(headers, name);
    if (ms === undefined) continue;
    if (ms > LONGEST_TIMER_MS) delete headers[name];
    else if (ms === 0 && grpc === (name === "grpc-timeout")) return true;
  }
  return false;
}
