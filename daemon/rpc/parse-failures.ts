import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import secureJson from "secure-json-parse";

/**
 * How connect-es words a request message that is not protobuf binary (protocol/serialization);
 * the daemon's short way words it the same (connect-unary-route.ts).
 */
export const PARSE_FAILURE = "parse binary: ";
const GRPC_INTERNAL = "13";
const GRPC_INVALID_ARGUMENT = "3";

/**
 * The daemon's routes for connect-es' Fastify plugin, with one correction to connect-es'
 * answers: a request message that is not valid protobuf binary is the caller's error.
 * connect-es answers it `internal` (HTTP 500 in Connect, grpc-status 13), a server fault that
 * clients are told to retry (spec 7); the daemon answers `invalid_argument` (400, grpc-status 3),
 * as its short way for binary Connect unary calls does (connect-unary-route.ts) and as
 * connect-go and gRPC do. connect-es parses the message before any interceptor runs and offers
 * no hook there, so each handler the routes register is wrapped and its answer corrected on the
 * way out: a Connect unary error body, a gRPC status trailer, or a gRPC-Web trailer frame. A
 * streaming call's message is parsed later, inside the interceptors, where
 * domainErrorInterceptor answers it (connect-errors.ts).
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

/** The response with a binary parse failure answered as the caller's error. */
async function withCallerFault(response: UniversalServerResponse) {
  const { body, trailer } = response;
  if (!body || !(Symbol.asyncIterator in body)) return response;
  // gRPC: the status trailer is set once the body has run (or failed) to its end.
  if (trailer?.has("grpc-status")) {
    return {
      ...response,
      body: (async function* () {
        yield* body;
        const message = decodeURIComponent(trailer.get("grpc-message") ?? "");
        if (trailer.get("grpc-status") === GRPC_INTERNAL && message.startsWith(PARSE_FAILURE)) {
          trailer.set("grpc-status", GRPC_INVALID_ARGUMENT);
        }
      })(),
    };
  }
  if (response.header?.get("content-type")?.startsWith("application/grpc-web")) {
    return { ...response, body: withGrpcWebStatusCorrected(body) };
  }
  // Connect unary: a 500 whose body is the error's JSON (uncompressed: it is short), one piece.
  if (response.status !== 500 || response.header?.get("content-encoding")) return response;
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  const bytes = Buffer.concat(chunks);
  const error = jsonObject(bytes);
  if (
    error?.code !== "internal" ||
    typeof error.message !== "string" ||
    !error.message.startsWith(PARSE_FAILURE)
  ) {
    return { ...response, body: oneChunk(bytes) };
  }
  const answer = Buffer.from(JSON.stringify({ ...error, code: "invalid_argument" }));
  const header = new Headers(response.header);
  header.set("content-length", String(answer.byteLength));
  return { ...response, status: 400, header, body: oneChunk(answer) };
}

/** gRPC-Web's trailer frame: flag 0x80, then the trailers as HTTP/1 header lines. */
const GRPC_WEB_TRAILER_FLAG = 0x80;
const FRAME_HEADER_BYTES = 5;

/**
 * A unary gRPC-Web body with a binary parse failure's status corrected. The failure comes
 * before any message, so its body is the trailer frame alone, one piece; a body of more pieces
 * passes as it is.
 */
async function* withGrpcWebStatusCorrected(body: AsyncIterable<Uint8Array>) {
  const chunks: Uint8Array[] = [];
  for await (const chunk of body) chunks.push(chunk);
  if (chunks.length === 1) yield correctedTrailerFrame(chunks[0] as Uint8Array);
  else yield* chunks;
}

function correctedTrailerFrame(frame: Uint8Array): Uint8Array {
  const bytes = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
  if (
    bytes.byteLength < FRAME_HEADER_BYTES ||
    bytes[0] !== GRPC_WEB_TRAILER_FLAG ||
    bytes.readUInt32BE(1) !== bytes.byteLength - FRAME_HEADER_BYTES
  ) {
    return frame;
  }
  const lines = bytes.subarray(FRAME_HEADER_BYTES).toString("latin1").split("\r\n");
  const value = (name: string) =>
    lines
      .find((line) => line.toLowerCase().startsWith(`${name}:`))
      ?.slice(name.length + 1)
      .trim();
  if (
    value("grpc-status") !== GRPC_INTERNAL ||
    !decodeURIComponent(value("grpc-message") ?? "").startsWith(PARSE_FAILURE)
  ) {
    return frame;
  }
  const trailers = Buffer.from(
    lines
      .map((line) =>
        line.toLowerCase().startsWith("grpc-status:")
          ? `grpc-status: ${GRPC_INVALID_ARGUMENT}`
          : line,
      )
      .join("\r\n"),
    "latin1",
  );
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header[0] = GRPC_WEB_TRAILER_FLAG;
  header.writeUInt32BE(trailers.byteLength, 1);
  return Buffer.concat([header, trailers]);
}

async function* oneChunk(bytes: Uint8Array) {
  yield bytes;
}

function jsonObject(bytes: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = secureJson.parse(bytes.toString("utf8"));
    return typeof value === "object" && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
