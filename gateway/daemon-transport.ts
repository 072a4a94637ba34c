import http2 from "node:http2";
import {
  create,
  type DescMessage,
  type DescMethodStreaming,
  type DescMethodUnary,
  fromBinary,
  type MessageInitShape,
  toBinary,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import {
  errorFromJsonBytes,
  requestHeader,
  trailerDemux,
  validateResponseWithCompression,
} from "@connectrpc/connect/protocol-connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { keptAsIs } from "#daemon/rpc/call-context.js";
import { kCallerPresence } from "#daemon/rpc/caller-presence.js";
import { DaemonConnection } from "#gateway/daemon-connection.js";
import { DEFAULT_KEEP_ALIVE, type KeepAlive } from "#gateway/daemon-link.js";
import type { Reply } from "#gateway/daemon-stream.js";

export interface DaemonTransportOptions {
  /** CONSENT_DAEMON_URL: the daemon's h2c port. */
  baseUrl: string;
  /** The largest response body read; a larger one fails the call with INTERNAL. */
  readMaxBytes?: number;
  /**
   * While calls are in flight, the connection is pinged every `intervalMs`; one that has not
   * answered within `timeoutMs` is given up, failing its calls with UNAVAILABLE. A connection idle
   * for `idleMs` is pinged before it carries a call (waiting at most `timeoutMs`, at most 2 s) and
   * replaced if it does not answer. A connection not set up within `timeoutMs` fails its calls, and
   * one going away fails the calls still on it after 3 × `timeoutMs`, or `timeoutMs` after the
   * daemon's drain limit (`drainTimeoutMs`) when that is later. Defaults: 5 s, 10 s, 60 s.
   */
  keepAlive?: KeepAlive;
  /**
   * The daemon's CONSENT_DRAIN_TIMEOUT_MS: how long a daemon shutting down may take to answer the
   * calls on the connection it told to go away. The stand-alone gateway passes its own setting.
   */
  drainTimeoutMs?: number;
}

/**
 * The largest answer the gateway reads. A team's banner list is every banner (spec 4.2 has no
 * pages), each configuration up to 248 KB: a thousand of the largest fit. This bounds a bad one.
 */
const DEFAULT_READ_MAX_BYTES = 256 * 1024 * 1024;

const { HTTP2_HEADER_METHOD, HTTP2_HEADER_PATH } = http2.constants;

/** The stand-alone gateway's transport, which its shutdown can make give up on its calls. */
export interface DaemonTransport extends Transport {
  /**
   * Fails every call in flight with UNAVAILABLE at once (the gateway answers them 503): for a
   * shutdown whose drain is running out, so that its clients get an answer before it cuts their
   * connections.
   */
  abandonCalls(): void;
}

/**
 * The gateway's client for a daemon in another process (split mode): unary calls in the Connect
 * protocol, binary, over one HTTP/2 connection, written on node:http2 directly. connect-node's
 * transport does the same through its general machinery (async iterables, a linked
 * AbortController and an aborted signal with its DOMException per call, a universal HTTP client):
 * about 400 µs of CPU per call on this hardware against about 60 µs for the HTTP/2 request itself
 * (bench/transport-hop.ts, bench/README.md), and split mode pays it on every REST request. The
 * protocol's own rules stay connect-es': its request headers, response validation, trailer
 * demultiplexing and error JSON (`@connectrpc/connect/protocol-connect`). Streaming calls, which
 * the gateway does not make, go through connect-node's transport.
 *
 * A read whose REST client leaves before its answer (caller-presence.ts) is cancelled: its stream
 * is reset with CANCEL, and the daemon aborts the call (its context's signal).
 *
 * A call that cannot reach the daemon, or loses it before the whole answer arrived (refused,
 * reset, connection lost, cut short), fails with UNAVAILABLE, so the gateway answers 503 (spec 7);
 * the next call opens a new connection. An answer larger than `readMaxBytes` fails as INTERNAL.
 * The connection's life is DaemonConnection's (daemon-connection.ts), the reading of one call's
 * stream daemon-stream.ts's; what is left here is the Connect protocol around them.
 */
export function createDaemonTransport(options: DaemonTransportOptions): DaemonTransport {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
  const connection = new DaemonConnection(baseUrl, {
    ...(options.keepAlive ?? DEFAULT_KEEP_ALIVE),
    drainMs: options.drainTimeoutMs,
  });
  let streaming: Transport | undefined;

  return {
    abandonCalls: () => connection.abandonCalls(),

    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      // As connect-es' transports: no deadline when none is given or it is not positive.
      const deadline = timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined;
      if (signal?.aborted) throw ConnectError.from(signal.reason, Code.Canceled);
      // A read's REST client that has left is owed nothing: nothing is sent.
      const presence = contextValues?.get(kCallerPresence);
      if (presence?.left) throw presence.left;
      const headers = requestHeaders(
        `${connection.pathPrefix}/${method.parent.typeName}/${method.name}`,
        deadline,
        header,
      );
      const body = toBinary(method.input, create(method.input, input));
      const reply = await connection.exchange({
        headers,
        body,
        readMaxBytes,
        signal,
        presence,
        timeoutMs: deadline,
      });
      return unaryResponse(method, reply);
    },

    stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: ContextValues,
    ): Promise<StreamResponse<I, O>> {
      streaming ??= createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true });
      return streaming.stream(method, signal, timeoutMs, header, input, contextValues);
    },
  };
}

/**
 * What connect-es' requestHeader adds to every unary binary call without a deadline
 * (Content-Type, Connect-Protocol-Version, and User-Agent unless the caller sends one), asked of
 * it once.
 */
const UNARY_HEADERS: Record<string, string> = {};
requestHeader("unary", true, undefined, undefined, true).forEach((value, name) => {
  UNARY_HEADERS[name] = value;
});
const USER_AGENT = "user-agent";

/**
 * A unary call's request headers as connect-es' requestHeader makes them, written into the
 * HTTP/2 header record. A caller's plain record of names and values that Headers keeps as they
 * are (what the gateway's relay sends) is copied as it is: making a Headers of it and reading it
 * back cost about 3.5 µs a call, more than the rest of the record's making. Anything else, and a
 * call with a deadline, goes through requestHeader itself.
 */
function requestHeaders(
  path: string,
  deadline: number | undefined,
  header: HeadersInit | undefined,
): http2.OutgoingHttpHeaders {
  const headers: http2.OutgoingHttpHeaders = {
    [HTTP2_HEADER_METHOD]: "POST",
    [HTTP2_HEADER_PATH]: path,
  };
  const record = deadline === undefined ? keptAsIs(header) : undefined;
  if (record === undefined) {
    requestHeader("unary", true, deadline, header, true).forEach((value, name) => {
      headers[name] = value;
    });
    return headers;
  }
  const callerAgent = record[USER_AGENT];
  Object.assign(headers, record, UNARY_HEADERS);
  if (callerAgent !== undefined) headers[USER_AGENT] = callerAgent;
  return headers;
}

/** The daemon's answer to a unary call, as connect-es' own transports read it. */
function unaryResponse<I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  reply: Reply,
): UnaryResponse<I, O> {
  const { header, carriesTrailers } = headersOf(reply.header);
  // No compression is offered, so an encoded answer is refused here, not misread.
  const { isUnaryError, unaryError } = validateResponseWithCompression(
    method.methodKind,
    [],
    true,
    reply.status,
    header,
  );
  // Without a trailer field, demultiplexing would only copy the header into a Headers of its own
  // (about 3 µs a call): the daemon's answers carry trailers only when a handler sets one.
  const [responseHeader, trailer] = carriesTrailers
    ? trailerDemux(header)
    : [header, new Headers()];
  if (isUnaryError) {
    const metadata = new Headers(responseHeader);
    trailer.forEach((value, name) => {
      metadata.append(name, value);
    });
    throw errorFromJsonBytes(reply.body, metadata, unaryError);
  }
  let message: ReturnType<typeof fromBinary<O>>;
  try {
    message = fromBinary(method.output, reply.body);
  } catch (error) {
    throw new ConnectError(`parse binary: ${String(error)}`, Code.Internal);
  }
  return {
    stream: false,
    service: method.parent,
    method,
    header: responseHeader,
    message,
    trailer,
  };
}

/** A Connect unary answer's trailer field: `trailer-` and the trailer's name (any case). */
const TRAILER_FIELD = /^trailer-/i;

/**
 * HTTP/2 response header fields as Fetch Headers, without pseudo-headers, and whether any of them
 * is a trailer's (trailerDemux's test).
 */
function headersOf(fields: http2.IncomingHttpHeaders): {
  header: Headers;
  carriesTrailers: boolean;
} {
  const header = new Headers();
  let carriesTrailers = false;
  for (const name in fields) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    const value = fields[name];
    if (value === undefined) continue;
    if (TRAILER_FIELD.test(name)) carriesTrailers = true;
    if (Array.isArray(value)) for (const item of value) header.append(name, item);
    else header.append(name, value);
  }
  return { header, carriesTrailers };
}
