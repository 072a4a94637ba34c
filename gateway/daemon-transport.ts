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
  validateResponse,
} from "@connectrpc/connect/protocol-connect";
import { createConnectTransport } from "@connectrpc/connect-node";

export interface DaemonTransportOptions {
  /** CONSENT_DAEMON_URL: the daemon's h2c port. */
  baseUrl: string;
  /** The largest response body read; a larger one fails the call with RESOURCE_EXHAUSTED. */
  readMaxBytes?: number;
}

/** Responses the gateway relays are small (a banner list page is the largest); this bounds a bad one. */
const DEFAULT_READ_MAX_BYTES = 16 * 1024 * 1024;

const {
  HTTP2_HEADER_METHOD,
  HTTP2_HEADER_PATH,
  HTTP2_HEADER_STATUS,
  HTTP2_HEADER_CONTENT_LENGTH,
  NGHTTP2_CANCEL,
  NGHTTP2_REFUSED_STREAM,
} = http2.constants;

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
 * A call that cannot reach the daemon (refused, reset, connection lost) fails with UNAVAILABLE, so
 * the gateway answers 503 (spec 7); the next call opens a new connection.
 */
export function createDaemonTransport(options: DaemonTransportOptions): Transport {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
  const connection = new DaemonConnection(baseUrl);
  let streaming: Transport | undefined;

  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      _contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      const deadline = timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined;
      signal?.throwIfAborted();
      const headers: http2.OutgoingHttpHeaders = {
        [HTTP2_HEADER_METHOD]: "POST",
        [HTTP2_HEADER_PATH]: `${connection.pathPrefix}/${method.parent.typeName}/${method.name}`,
      };
      requestHeader(method.methodKind, true, deadline, header, true).forEach((value, name) => {
        headers[name] = value;
      });
      const body = toBinary(method.input, create(method.input, input));
      const reply = await connection.exchange(headers, body, readMaxBytes, signal, deadline);
      const { isUnaryError, unaryError } = validateResponse(
        method.methodKind,
        true,
        reply.status,
        reply.header,
      );
      const [responseHeader, trailer] = trailerDemux(reply.header);
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

/** A response as read off the wire. */
interface Reply {
  status: number;
  header: Headers;
  body: Uint8Array;
}

/**
 * One HTTP/2 connection to the daemon, opened on first use and replaced once it closes, fails or
 * is told to go away (calls already on it finish there). It keeps the process alive only while a
 * call is in flight.
 */
class DaemonConnection {
  readonly pathPrefix: string;
  private readonly origin: string;
  private session: http2.ClientHttp2Session | undefined;
  private inFlight = 0;

  constructor(baseUrl: string) {
    const url = new URL(baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, "");
  }

  exchange(
    headers: http2.OutgoingHttpHeaders,
    body: Uint8Array,
    readMaxBytes: number,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
  ): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      let stream: http2.ClientHttp2Stream;
      const session = this.current();
      try {
        stream = session.request(headers, { endStream: false });
      } catch (error) {
        this.forget(session);
        reject(unreachable(error));
        return;
      }
      this.begin(session);
      let status = 0;
      let header: Headers | undefined;
      const chunks: Buffer[] = [];
      let received = 0;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (error: ConnectError | undefined) => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.end(session);
        if (error) {
          if (!stream.closed) stream.close(NGHTTP2_CANCEL);
          reject(error);
          return;
        }
        resolve({
          status,
          header: header ?? new Headers(),
          body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received),
        });
      };
      const onAbort = () => finish(ConnectError.from(signal?.reason, Code.Canceled));
      signal?.addEventListener("abort", onAbort);
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () => finish(new ConnectError("the operation timed out", Code.DeadlineExceeded)),
          timeoutMs,
        );
      }
      stream.on("response", (received) => {
        status = Number(received[HTTP2_HEADER_STATUS]);
        header = headersOf(received);
        const length = Number(received[HTTP2_HEADER_CONTENT_LENGTH]);
        if (length > readMaxBytes) finish(tooLarge(readMaxBytes));
      });
      stream.on("data", (chunk: Buffer) => {
        received += chunk.byteLength;
        if (received > readMaxBytes) {
          finish(tooLarge(readMaxBytes));
          return;
        }
        chunks.push(chunk);
      });
      stream.on("end", () => {
        if (header) finish(undefined);
        else
          finish(
            new ConnectError("the daemon closed the call without answering", Code.Unavailable),
          );
      });
      stream.on("error", (error) => finish(unreachable(error)));
      stream.on("close", () => {
        if (settled) return;
        finish(closedWith(stream.rstCode));
      });
      stream.end(body);
    });
  }

  /** The open connection, or a new one. */
  private current(): http2.ClientHttp2Session {
    const open = this.session;
    if (open && !open.closed && !open.destroyed) return open;
    const session = http2.connect(this.origin);
    const drop = () => this.forget(session);
    session.on("error", drop);
    session.on("close", drop);
    session.on("goaway", drop);
    session.unref();
    this.session = session;
    this.inFlight = 0;
    return session;
  }

  private forget(session: http2.ClientHttp2Session): void {
    if (this.session === session) this.session = undefined;
  }

  private begin(session: http2.ClientHttp2Session): void {
    if (session === this.session && this.inFlight++ === 0) session.ref();
  }

  private end(session: http2.ClientHttp2Session): void {
    if (session === this.session && --this.inFlight === 0) session.unref();
  }
}

/** HTTP/2 response headers as Fetch Headers, without pseudo-headers. */
function headersOf(received: http2.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const name in received) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    const value = received[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.append(name, value);
  }
  return headers;
}

function tooLarge(readMaxBytes: number): ConnectError {
  return new ConnectError(
    `message size is larger than configured readMaxBytes ${readMaxBytes}`,
    Code.ResourceExhausted,
  );
}

/** A failure below the protocol: the daemon could not be reached or went away. */
function unreachable(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  const connectError = new ConnectError(
    `the daemon could not be reached: ${error instanceof Error ? error.message : String(error)}`,
    Code.Unavailable,
  );
  connectError.cause = error;
  return connectError;
}

/** A stream that closed before it ended, by its RST_STREAM code. */
function closedWith(rstCode: number | undefined): ConnectError {
  if (rstCode === NGHTTP2_CANCEL) return new ConnectError("the call was canceled", Code.Canceled);
  if (rstCode === undefined || rstCode === 0 || rstCode === NGHTTP2_REFUSED_STREAM) {
    return new ConnectError("the daemon closed the call without answering", Code.Unavailable);
  }
  return new ConnectError(
    `http/2 stream closed with error code 0x${rstCode.toString(16)}`,
    Code.Internal,
  );
}
