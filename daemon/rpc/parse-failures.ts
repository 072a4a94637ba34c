import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import {
  encodeEnvelope,
  type UniversalHandler,
  type UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { clipped } from "#daemon/errors.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

/**
 * How connect-es words a request message that is not protobuf binary (protocol/serialization);
 * the daemon's short way words it the same (connect-unary-route.ts).
 */
export const PARSE_FAILURE = "parse binary: ";
/**
 * How connect-es words a message whose envelope says compressed in a call that names no
 * compression (protocol/envelope): as malformed as a message that does not parse.
 */
const COMPRESSED_WITHOUT_ENCODING =
  "received compressed envelope, but do not know how to decompress";
/**
 * How connect-es words a compressed message that does not decompress (connect-node's
 * compression): `invalid_argument` for bytes that are no gzip or brotli, but `internal` for a
 * stream cut short before its end (zlib's Z_BUF_ERROR, "unexpected end of file"), as malformed
 * as the other. A limit passed is `resource_exhausted`, worded otherwise.
 */
const DECOMPRESSION_FAILED = "decompression failed";

/**
 * connect-es' answer to a request message that is not protobuf binary (protocol/serialization),
 * that claims a compression the call does not name (protocol/envelope), or whose compressed
 * bytes end before their stream does.
 */
export function isParseFailure(error: unknown): error is ConnectError {
  return (
    error instanceof ConnectError &&
    error.code === Code.Internal &&
    (error.rawMessage.startsWith(PARSE_FAILURE) ||
      error.rawMessage === COMPRESSED_WITHOUT_ENCODING ||
      error.rawMessage === DECOMPRESSION_FAILED)
  );
}

/** decisions §7: the ErrorInfo of a request the daemon cannot read, spec 7's invalid_request. */
const INVALID_REQUEST_INFO = [
  { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { code: "invalid_request" }) },
];

/**
 * A request the daemon cannot read (a message that does not decode, a malformed deadline) as the
 * caller's error: `invalid_argument`, carrying the ErrorInfo with the machine code every other
 * invalid request carries (decisions §7), and the reason, clipped as every error text is.
 */
export function unreadableRequest(reason: string): ConnectError {
  return new ConnectError(clipped(reason), Code.InvalidArgument, undefined, INVALID_REQUEST_INFO);
}

/**
 * connect-es' own refusal of a request it could not read: a parse failure (isParseFailure), or an
 * `invalid_argument` it raised, which carries no ErrorInfo: a JSON message that does not parse
 * (or is not UTF-8, utf8JsonDecoder), a deadline that is no deadline. The daemon's own refusals
 * always carry one (connect-errors.ts, toConnectError).
 */
export function isUnreadableRequest(error: unknown): error is ConnectError {
  return (
    isParseFailure(error) ||
    (error instanceof ConnectError &&
      error.code === Code.InvalidArgument &&
      error.details.length === 0)
  );
}

/**
 * How connect-es words its refusal of a request message past readMaxBytes: from the envelope's
 * length prefix (protocol/envelope), or once decompressed (connect-node's compression).
 */
const PAST_READ_MAX_BYTES = "larger than configured readMaxBytes";

/** connect-es' refusal of a request message past readMaxBytes, which carries no ErrorInfo. */
export function isOversizedRequest(error: unknown): error is ConnectError {
  return (
    error instanceof ConnectError &&
    error.code === Code.ResourceExhausted &&
    error.details.length === 0 &&
    error.rawMessage.includes(PAST_READ_MAX_BYTES)
  );
}

/**
 * A request message past what the daemon reads, as REST's 413 for a body past its limit is (spec
 * 8): `resource_exhausted` (decisions §7's code of a body too large) with the ErrorInfo of an
 * invalid request, and the reason.
 */
export function oversizedRequest(reason: string): ConnectError {
  return new ConnectError(clipped(reason), Code.ResourceExhausted, undefined, INVALID_REQUEST_INFO);
}

/**
 * connect-es' refusal of a request it cannot read (isUnreadableRequest) or hold (past
 * readMaxBytes) as the daemon answers it, with its ErrorInfo; undefined for any other failure.
 */
export function callerFault(error: unknown): ConnectError | undefined {
  if (isUnreadableRequest(error)) return unreadableRequest(error.rawMessage);
  if (isOversizedRequest(error)) return oversizedRequest(error.rawMessage);
  return undefined;
}

/**
 * The daemon's routes for connect-es' Fastify plugin, with one correction to connect-es'
 * answers: a request it cannot read is the caller's error, answered unreadableRequest. A request
 * message that is not valid protobuf binary connect-es answers `internal` (HTTP 500 in Connect,
 * grpc-status 13), a server fault that clients are told to retry (spec 7); the daemon answers
 * `invalid_argument` (400, grpc-status 3), as its short way for binary Connect unary calls does
 * (connect-unary-route.ts) and as connect-go and gRPC do. The `invalid_argument` connect-es
 * raises itself (a JSON message that does not parse) gains the ErrorInfo decisions §7 gives every
 * failure. connect-es parses the message before any interceptor runs and offers no hook there,
 * so each handler the routes register is wrapped and its answer corrected on the way out: a
 * Connect unary error body, a gRPC status trailer, or a gRPC-Web trailer frame. A streaming
 * call's message is parsed later, inside the interceptors, where domainErrorInterceptor answers
 * it (connect-errors.ts).
 */
export function answeringParseFailuresAsInvalid(
  routes: (router: ConnectRouter) => void,
): (router: ConnectRouter) => void {
  return (router) => {
    routes(router);
    // The plugin registers router.handlers once routes() returns: the wrapped ones.
    router.handlers.splice(0, router.handlers.length, ...router.handlers.map(correcting));
  };
}

function correcting(handler: UniversalHandler): UniversalHandler {
  // A streaming call's request is parsed inside the interceptors (see above).
  if (handler.method.methodKind !== "unary") return handler;
  const corrected = async (request: Parameters<UniversalHandler>[0]) =>
    withCallerFault(await handler(request));
  // The handler's description (path, method, protocols) with it, as the plugin reads it.
  return Object.assign(corrected, handler);
}

/**
 * The response with a request connect-es could not read answered as the caller's error, read and
 * written with connect-es' own codecs for each protocol's error: the gRPC status trailer, the
 * gRPC-Web trailer frame, the Connect error JSON.
 */
async function withCallerFault(response: UniversalServerResponse) {
  const { body, trailer } = response;
  if (!body || !(Symbol.asyncIterator in body)) return response;
  // gRPC: the status trailer is set once the body has run (or failed) to its end.
  if (trailer?.has("grpc-status")) {
    return {
      ...response,
      body: (async function* () {
        yield* body;
        const corrected = callerFault(findTrailerError(trailer));
        if (corrected) setTrailerStatus(trailer, corrected);
      })(),
    };
  }
  if (response.header?.get("content-type")?.startsWith("application/grpc-web")) {
    return { ...response, body: withGrpcWebStatusCorrected(body) };
  }
  // Connect unary: a 500, 400 or 429 whose body is the error's JSON (uncompressed: it is short),
  // one piece.
  const failed = response.status === 500 || response.status === 400 || response.status === 429;
  if (!failed || response.header?.get("content-encoding")) return response;
  const bytes = Buffer.concat(await chunksOf(body));
  const corrected = callerFault(errorFromJsonBytes(bytes, undefined, NOT_AN_ERROR));
  if (!corrected) return { ...response, body: oneChunk(bytes) };
  const answer = errorToJsonBytes(corrected, undefined);
  const header = new Headers(response.header);
  header.set("content-length", String(answer.byteLength));
  const status = corrected.code === Code.ResourceExhausted ? 429 : 400;
  return { ...response, status, header, body: oneChunk(answer) };
}

/** What errorFromJsonBytes answers for a body that is no error JSON: never an unreadable request. */
const NOT_AN_ERROR = new ConnectError("", Code.Unknown);

/**
 * A unary gRPC-Web body with an unreadable request's status corrected. The failure comes before
 * any message, so its body is the trailer frame alone, one piece; a body of more pieces passes as
 * it is.
 */
async function* withGrpcWebStatusCorrected(body: AsyncIterable<Uint8Array>) {
  const chunks = await chunksOf(body);
  if (chunks.length === 1) yield correctedTrailerFrame(chunks[0] as Uint8Array);
  else yield* chunks;
}

/** A frame that is the trailers alone (flag 0x80, uncompressed), corrected; any other as it is. */
function correctedTrailerFrame(frame: Uint8Array): Uint8Array {
  const view = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
  const length = view.byteLength - ENVELOPE_HEADER_BYTES;
  if (length < 0 || view[0] !== trailerFlag || view.readUInt32BE(1) !== length) return frame;
  const trailer = trailerParse(view.subarray(ENVELOPE_HEADER_BYTES));
  const corrected = callerFault(findTrailerError(trailer));
  if (!corrected) return frame;
  setTrailerStatus(trailer, corrected);
  return encodeEnvelope(trailerFlag, trailerSerialize(trailer));
}

/** An envelope's flags byte and 32-bit length. */
const ENVELOPE_HEADER_BYTES = 5;

async function chunksOf(body: AsyncIterable<Uint8Array>): Promise<Uint8Array[]> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  return chunks;
}

async function* oneChunk(bytes: Uint8Array) {
  yield bytes;
}
