import { Code, ConnectError } from "@connectrpc/connect";
import { SUBJECTS_UNAVAILABLE_HINT } from "#cli/commands/health-check.js";
import { ConfigError } from "#daemon/config.js";
import { TAIL_READ_STOPPED_MESSAGE } from "#daemon/errors.js";
import { isStoreFull } from "#daemon/store/disk-guard.js";
import { type ErrorInfo, ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

/**
 * A failure the operator can act on (bad input, missing token, unreadable file): printed as one
 * sentence plus a hint, exit 1, never a stack trace. Anything that is not a UserError, a
 * ConnectError or a ConfigError is treated as a bug in consentctl (cli-kit's split).
 */
export class UserError extends Error {
  override name = "UserError";
  constructor(
    message: string,
    readonly hint?: string,
    /** Machine code for `--json` error output. */
    readonly code = "user_error",
  ) {
    super(message);
  }
}

/** What the operator sees of a failure, in human or JSON form. */
export interface Problem {
  /** One human sentence. */
  message: string;
  hint?: string;
  /**
   * Machine code: the daemon's ErrorInfo code when it sent one, else a CLI code; a refused
   * operator token is `unauthorized` whichever service refused it.
   */
  code: string;
  /** Validation failures, one per violated rule. */
  details: { field: string; message: string }[];
  /** True when the failure is a bug (ours or the daemon's) rather than something to fix. */
  bug: boolean;
  /** The original error, for `--debug`. */
  cause: unknown;
}

/** Where the failing command was talking to, so messages can name it. */
export interface ProblemContext {
  daemonUrl: string;
  /** Where the operator token came from ("--token", "CONSENT_ADMIN_TOKEN", a file path). */
  tokenSource?: string;
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
]);

/**
 * Failures of a peer that answered in another protocol: nghttp2's protocol error when the bytes
 * that came back are not HTTP/2 (an HTTP/1.1 port, such as the REST gateway's), and OpenSSL's
 * when an https:// URL reaches a port that speaks no TLS (the daemon serves h2c).
 */
const NOT_HTTP2_CODES = new Set(["ERR_HTTP2_ERROR"]);
const NOT_TLS_CODES = new Set(["ERR_SSL_WRONG_VERSION_NUMBER", "ERR_SSL_PACKET_LENGTH_TOO_LONG"]);

/** Node's codes for a TLS certificate this client does not accept (OpenSSL's verify results). */
const CERTIFICATE_CODES = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE",
  "INVALID_CA",
  "HOSTNAME_MISMATCH",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** Why a store that answers may refuse writes, as health, doctor and a refused write say it. */
export const WRITES_REFUSED =
  "the store refuses writes: the data directory's disk is low on free space (CONSENT_MIN_FREE_MB; reads are served)";
/** WRITES_REFUSED as the sentence a refused write is told with. */
const STORE_FULL = `${WRITES_REFUSED[0]?.toUpperCase()}${WRITES_REFUSED.slice(1)}.`;
export const WRITES_REFUSED_HINT =
  "free space on that disk (writes resume once a quarter more than the minimum, at most 256 MB more, is free), or lower CONSENT_MIN_FREE_MB";

const START_HINT =
  "start it with `npm start` (or `consentd`), or set CONSENT_DAEMON_URL / --daemon";

/** Translates any thrown value into the one Problem shape every output path prints. */
export function describeProblem(error: unknown, context: ProblemContext): Problem {
  const base = { details: [], bug: false, cause: error };
  if (error instanceof UserError) {
    return { ...base, message: error.message, hint: error.hint, code: error.code };
  }
  if (error instanceof ConfigError) {
    return {
      ...base,
      message: `The configuration is invalid: ${error.message}.`,
      hint: "fix the environment variable (the README's configuration table lists each one and its default)",
      code: "invalid_config",
    };
  }
  if (error instanceof ConnectError) return describeConnectError(error, context);
  const message = error instanceof Error ? error.message : String(error);
  return {
    ...base,
    bug: true,
    message: `consentctl failed unexpectedly: ${message}`,
    hint: "run the command again with --debug and report the output",
    code: "internal",
  };
}

function describeConnectError(error: ConnectError, context: ProblemContext): Problem {
  const info = error.findDetails(ErrorInfoSchema)[0];
  const base = { details: [], bug: false, cause: error };
  const transport = info ? undefined : transportFailure(error);
  if (transport) return { ...base, ...describeTransportFailure(transport, context.daemonUrl) };
  // The disk guard's refusal (an internal error the daemon marks): the operator's to fix, and the
  // daemon logged it once when it began, so "see the daemon's log" would find nothing for it.
  if (isStoreFull(error)) {
    return { ...base, code: "store_full", message: STORE_FULL, hint: WRITES_REFUSED_HINT };
  }
  // A stream's connection that stopped answering (daemon-client.ts checks it with a PING) is
  // what a call's deadline is to a single call.
  const silent = error.code === Code.Unavailable && error.rawMessage === "PING timed out";
  if (error.code === Code.DeadlineExceeded || silent) {
    return {
      ...base,
      message: `The daemon at ${context.daemonUrl} did not answer in time.`,
      hint: "check that the URL points at consentd (not the REST gateway) and that it is not overloaded",
      code: "deadline_exceeded",
    };
  }
  const code = info?.code || codeName(error.code);
  const details = info?.details.map(({ field, message }) => ({ field, message })) ?? [];
  const message = sentence(withoutRepeatedDetail(error.rawMessage, details));
  switch (error.code) {
    case Code.Unauthenticated:
      // The CLI sends no API key, only the operator token: the daemon's words for a key that is
      // not one ("The API key is malformed or unknown") would send the operator looking for one.
      // Its code likewise: a team-scoped call reads a refused token as a key (invalid_key), an
      // admin call as the operator's (unauthorized); scripts get the one code for one mistake.
      return {
        ...base,
        details,
        code: "unauthorized",
        message: context.tokenSource
          ? "The daemon did not accept the operator token."
          : "This call needs the daemon's operator token.",
        hint: tokenHint(context),
      };
    case Code.Unimplemented:
      // A daemon of an earlier release than this consentctl: it does not know the call, and says
      // which one (the service or method it does not serve). No fault of either program.
      return {
        ...base,
        code,
        message: `The daemon at ${context.daemonUrl} does not serve this call: ${message}`,
        hint: "it is of an earlier release than this consentctl (consentctl --version names this one): upgrade consentd, or use the consentctl of its release",
      };
    case Code.Internal:
    case Code.Unknown:
    case Code.DataLoss:
      return {
        ...base,
        bug: true,
        code,
        message: `The daemon failed: ${message}`,
        hint: "see the daemon's log; run again with --debug for details",
      };
    case Code.ResourceExhausted:
      return { ...base, details, code, message, hint: retryHint(retryAfterOf(error, info)) };
    case Code.Unavailable:
      return {
        ...base,
        details,
        code,
        message,
        hint: unavailableHint(error, code, retryAfterOf(error, info)),
      };
    default:
      return { ...base, details, code, message };
  }
}

/**
 * Nothing answered (nothing listening, DNS, a reset), something other than the daemon's h2c
 * port answered, an https:// URL met a port without TLS, or a TLS peer whose certificate this
 * client does not accept (with OpenSSL's words for why).
 */
type TransportFailure = "unreachable" | "not_daemon" | "not_tls" | { certificate: string };

/** The transport failure under a ConnectError, from the Node error codes of its causes. */
function transportFailure(error: ConnectError): TransportFailure | undefined {
  let cause: unknown = error.cause;
  for (let depth = 0; cause instanceof Error && depth < 10; depth++) {
    const nodeCode = (cause as NodeJS.ErrnoException).code;
    if (nodeCode && NOT_TLS_CODES.has(nodeCode)) return "not_tls";
    if (nodeCode && CERTIFICATE_CODES.has(nodeCode)) return { certificate: cause.message };
    if (nodeCode && NOT_HTTP2_CODES.has(nodeCode)) return "not_daemon";
    // Any other HTTP/2 failure (a GOAWAY, a session torn down) is a daemon going away.
    if (nodeCode && (NETWORK_CODES.has(nodeCode) || nodeCode.startsWith("ERR_HTTP2_"))) {
      return "unreachable";
    }
    cause = cause.cause;
  }
  return undefined;
}

/** A transport failure as the operator reads it, naming the address that was tried. */
function describeTransportFailure(
  failure: TransportFailure,
  daemonUrl: string,
): Pick<Problem, "message" | "hint" | "code"> {
  if (typeof failure === "object") {
    return {
      message: `The TLS certificate at ${daemonUrl} is not accepted: ${failure.certificate.replace(/\.$/, "")}.`,
      hint: "a certificate from a private CA needs that CA's certificate in NODE_EXTRA_CA_CERTS (a PEM file); it must also name the URL's host and be in date",
      code: "tls_certificate",
    };
  }
  switch (failure) {
    case "unreachable":
      return {
        message: `Cannot reach the daemon at ${daemonUrl}.`,
        hint: START_HINT,
        code: "daemon_unreachable",
      };
    case "not_daemon":
      return {
        message: `Something answered at ${daemonUrl}, but it is not the daemon's gRPC (h2c) port.`,
        hint: "point --daemon or CONSENT_DAEMON_URL at the daemon's gRPC port (CONSENT_GRPC_PORT, default 50051), not the REST gateway's (CONSENT_HTTP_PORT)",
        code: "not_daemon",
      };
    case "not_tls":
      return {
        message: `${daemonUrl} does not speak TLS (the daemon serves h2c, without it).`,
        hint: `use ${daemonUrl.replace(/^https:/, "http:")}, or the https:// address of a TLS proxy in front of the daemon`,
        code: "tls_unavailable",
      };
  }
}

function tokenHint(context: ProblemContext): string {
  const source = context.tokenSource ? ` (the token came from ${context.tokenSource})` : "";
  return `pass the daemon's operator token with --token or CONSENT_ADMIN_TOKEN, or point CONSENT_DATA_DIR at the daemon's data directory${source}`;
}

function retryHint(seconds: number | undefined): string | undefined {
  return seconds ? `retry in ${seconds} s` : undefined;
}

/**
 * What to do about a daemon's 503: without an identity key, only the operator can end it
 * (README, "Privacy"); with its store out of reach, retry when the daemon says to (300 s for a
 * MongoDB replica set that needs its operator's repair), and its log says why while it lasts. A
 * tail's read that the store stopped at its time limit is no outage: the daemon logs nothing
 * for it (README, "MongoDB"), and a store too busy for the tail's newest rows is what lasts.
 */
function unavailableHint(
  error: ConnectError,
  code: string,
  seconds: number | undefined,
): string | undefined {
  if (code === "identity_unavailable") return SUBJECTS_UNAVAILABLE_HINT;
  const retry = retryHint(seconds);
  if (!retry) return undefined;
  if (error.rawMessage === TAIL_READ_STOPPED_MESSAGE) {
    return `${retry}; if it goes on, the store is too busy to read the team's newest rows within its time limit, which the daemon does not log: lighten the store's load, or raise CONSENT_LOG_READ_TIMEOUT_MS (CONSENT_MONGODB_TIMEOUT_MS on MongoDB)`;
  }
  return `${retry}; if it goes on, see the daemon's log`;
}

/** The seconds a refusal asks to wait: its ErrorInfo's, else its `retry-after` metadata. */
function retryAfterOf(error: ConnectError, info: ErrorInfo | undefined): number | undefined {
  if (info?.retryAfterSeconds) return info.retryAfterSeconds;
  const header = Number(error.metadata.get("retry-after") ?? undefined);
  return Number.isSafeInteger(header) && header > 0 ? header : undefined;
}

/** Code.NotFound → "not_found", the spelling the daemon's own codes use. */
function codeName(code: Code): string {
  return Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}

/** "Validation failed: name is required" → "Validation failed" when the detail list says it anyway. */
function withoutRepeatedDetail(message: string, details: { message: string }[]): string {
  const first = details[0]?.message;
  return first && message.endsWith(`: ${first}`) ? message.slice(0, -first.length - 2) : message;
}

/** Daemon messages are sentences without a final stop; print them as sentences. */
function sentence(text: string): string {
  const trimmed = text.trim() || "The daemon refused the request";
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

/** The stack of an error and of each of its causes, for --debug. */
export function stackOf(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 5; depth++) {
    parts.push(current instanceof Error ? (current.stack ?? String(current)) : String(current));
    current = current instanceof Error ? current.cause : undefined;
    if (current !== undefined) parts.push("caused by:");
  }
  return parts.join("\n");
}

/** Exit status of a failure: 1 for anything but a usage error, which commander exits with 2. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
