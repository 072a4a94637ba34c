import http2 from "node:http2";
import { isIP, connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
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
import { BODY_BUDGET_BYTES } from "#gateway/body-budget.js";

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
   * one going away fails the calls still on it after 3 × `timeoutMs`. Defaults: 5 s, 10 s, 60 s.
   */
  keepAlive?: KeepAlive;
}

/**
 * The largest answer the gateway reads. A team's banner list is every banner (spec 4.2 has no
 * pages), each configuration up to 248 KB: a thousand of the largest fit. This bounds a bad one.
 */
const DEFAULT_READ_MAX_BYTES = 256 * 1024 * 1024;

const {
  HTTP2_HEADER_METHOD,
  HTTP2_HEADER_PATH,
  HTTP2_HEADER_STATUS,
  HTTP2_HEADER_CONTENT_LENGTH,
  NGHTTP2_CANCEL,
  NGHTTP2_ENHANCE_YOUR_CALM,
  NGHTTP2_NO_ERROR,
  NGHTTP2_REFUSED_STREAM,
} = http2.constants;

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
 * A call that cannot reach the daemon, or loses it before the whole answer arrived (refused,
 * reset, connection lost, cut short), fails with UNAVAILABLE, so the gateway answers 503 (spec 7);
 * the next call opens a new connection. An answer larger than `readMaxBytes` fails as INTERNAL.
 */
export function createDaemonTransport(options: DaemonTransportOptions): DaemonTransport {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
  const connection = new DaemonConnection(baseUrl, options.keepAlive ?? DEFAULT_KEEP_ALIVE);
  let streaming: Transport | undefined;

  return {
    abandonCalls: () => connection.abandonCalls(),

    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      _contextValues?: ContextValues,
    ): Promise<UnaryResponse<I, O>> {
      // As connect-es' transports: no deadline when none is given or it is not positive.
      const deadline = timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined;
      if (signal?.aborted) throw ConnectError.from(signal.reason, Code.Canceled);
      const headers: http2.OutgoingHttpHeaders = {
        [HTTP2_HEADER_METHOD]: "POST",
        [HTTP2_HEADER_PATH]: `${connection.pathPrefix}/${method.parent.typeName}/${method.name}`,
      };
      requestHeader(method.methodKind, true, deadline, header, true).forEach((value, name) => {
        headers[name] = value;
      });
      const body = toBinary(method.input, create(method.input, input));
      const reply = await connection.exchange({
        headers,
        body,
        readMaxBytes,
        signal,
        timeoutMs: deadline,
      });
      // No compression is offered, so an encoded answer is refused here, not misread.
      const { isUnaryError, unaryError } = validateResponseWithCompression(
        method.methodKind,
        [],
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

/** A request as sent on the wire, with the bounds of its answer. */
interface Call {
  headers: http2.OutgoingHttpHeaders;
  body: Uint8Array;
  readMaxBytes: number;
  signal: AbortSignal | undefined;
  timeoutMs: number | undefined;
}

/** A response as read off the wire. */
interface Reply {
  status: number;
  header: Headers;
  body: Uint8Array;
}

/**
 * What the connection's HTTP/2 session may hold, in Node's unit for `maxSessionMemory` (10^6
 * bytes). Node's default, 10, counts the request bodies queued on the session while the daemon's
 * flow control holds them back, and past it Node drops each answer whose headers arrive then
 * (RST_STREAM ENHANCE_YOUR_CALM from this side): a burst of large banner bodies (128 of 200 KB)
 * had calls the daemon had carried out answered 503, and could leave the connection refusing
 * answers for a minute after. The bodies are the gateway's own, already bounded by its body budget
 * (BODY_BUDGET_BYTES): the session holds that budget, and as much again for headers, answers
 * and nghttp2's own state.
 */
const SESSION_MEMORY_MB = Math.ceil((2 * BODY_BUDGET_BYTES) / 1e6);

/** A stream the daemon refused before processing it (REFUSED_STREAM, or past a GOAWAY). */
class Refused extends Error {}

interface KeepAlive {
  intervalMs: number;
  timeoutMs: number;
  idleMs?: number;
}

const DEFAULT_KEEP_ALIVE = { intervalMs: 5_000, timeoutMs: 10_000, idleMs: 60_000 };
/**
 * A connection going away (told by the daemon, or replaced) cannot be pinged: the calls still on
 * it are given up this many keep-alive timeouts after it began closing.
 */
const CLOSING_GRACE_FACTOR = 3;
/** How long the ping after an idle time may take before the connection counts as gone. */
const IDLE_PING_TIMEOUT_MS = 2_000;
/**
 * A client opens at most 2^30 streams on one connection (odd IDs below 2^31); the connection is
 * replaced well before it runs out.
 */
const MAX_STREAMS = 2 ** 30 - 2 ** 20;

/** One HTTP/2 connection and what is known of its use. */
interface Link {
  session: http2.ClientHttp2Session;
  /** Calls on it not yet settled. */
  inFlight: number;
  /** Streams opened on it (cheaper to count than to ask session.state). */
  opened: number;
  lastUsed: number;
  /** Pings it while calls are in flight on it, whether or not it is still the current one. */
  watch: NodeJS.Timeout | undefined;
  /** The ping checking it after an idle time, shared by the calls waiting for it. */
  probe: Promise<boolean> | undefined;
}

/**
 * One HTTP/2 connection to the daemon, opened on first use and replaced once it closes, fails, is
 * told to go away (calls already on it finish there) or nears its last stream ID. A connection
 * idle for a minute is pinged before it carries a call, so a connection dropped silently (a NAT
 * or load balancer forgetting an idle flow) costs one ping, not a hung request. A call the daemon
 * refused unprocessed is sent once more (on a new connection when the daemon is going away).
 * While calls are in flight on a connection, current or replaced, it is pinged now and then, so
 * one that dies silently under them fails them (503) instead of leaving them waiting for TCP to
 * give up. A connection keeps the process alive only while a call is in flight on it.
 */
class DaemonConnection {
  readonly pathPrefix: string;
  private readonly origin: string;
  /** The connection new calls go on. */
  private current: Link | undefined;
  /** How to fail each call in flight, on any connection. */
  private readonly active = new Set<(error: Error) => void>();
  /** Set by abandonCalls: every call from then on fails at once. */
  private abandoned = false;

  private readonly keepAlive: Required<KeepAlive>;

  constructor(baseUrl: string, keepAlive: KeepAlive) {
    this.keepAlive = { ...keepAlive, idleMs: keepAlive.idleMs ?? DEFAULT_KEEP_ALIVE.idleMs };
    const url = new URL(baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, "");
  }

  async exchange(call: Call): Promise<Reply> {
    // Calls that start after the shutdown gave the others up, or were waiting to be sent.
    if (this.abandoned) throw shuttingDown();
    // One deadline for the whole call: the connection check and a second attempt count in it.
    const deadlineAt = call.timeoutMs === undefined ? undefined : Date.now() + call.timeoutMs;
    const send = async () => {
      const link = await this.usable(call.signal, deadlineAt);
      const left = deadlineAt === undefined ? undefined : deadlineAt - Date.now();
      if (left !== undefined && left <= 0) throw deadlineExceeded();
      return this.attempt(link, { ...call, timeoutMs: left });
    };
    try {
      return await send();
    } catch (error) {
      if (!(error instanceof Refused)) throw error;
    }
    try {
      return await send();
    } catch (again) {
      throw again instanceof Refused ? unreachable(again.cause) : again;
    }
  }

  private attempt(link: Link, call: Call): Promise<Reply> {
    const { headers, body, readMaxBytes, signal, timeoutMs } = call;
    const { session } = link;
    return new Promise<Reply>((resolve, reject) => {
      // Given up by a shutdown while the connection was being checked.
      if (this.abandoned) {
        reject(shuttingDown());
        return;
      }
      // Aborted while the connection was being checked, or before the second attempt.
      if (signal?.aborted) {
        reject(ConnectError.from(signal.reason, Code.Canceled));
        return;
      }
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request(headers, { endStream: false });
      } catch (error) {
        if (!sendable(session, error)) {
          reject(new ConnectError(`the call could not be sent: ${String(error)}`, Code.Internal));
          return;
        }
        // Nothing was sent (the connection is closing or going away): the call may go again.
        this.retire(link);
        reject(new Refused("the connection could not carry the call", { cause: error }));
        return;
      }
      this.begin(link);
      let status = 0;
      let header: Headers | undefined;
      let declaredLength: number | undefined;
      const chunks: Buffer[] = [];
      let received = 0;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (error: Error | undefined) => {
        if (settled) return;
        settled = true;
        this.active.delete(finish);
        if (timer) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.end(link);
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
      this.active.add(finish);
      const onAbort = () => finish(ConnectError.from(signal?.reason, Code.Canceled));
      signal?.addEventListener("abort", onAbort);
      if (timeoutMs !== undefined) timer = setTimeout(() => finish(deadlineExceeded()), timeoutMs);
      stream.on("response", (received) => {
        status = Number(received[HTTP2_HEADER_STATUS]);
        header = headersOf(received);
        const length = received[HTTP2_HEADER_CONTENT_LENGTH];
        declaredLength = length === undefined ? undefined : Number(length);
        // The limit guards the gateway against a bad answer: an internal failure, not the caller's.
        if (declaredLength !== undefined && declaredLength > readMaxBytes)
          finish(tooLarge(readMaxBytes));
      });
      stream.on("data", (chunk: Buffer) => {
        // After a failure (too large, aborted) the stream is being closed: nothing more is kept.
        if (settled) return;
        received += chunk.byteLength;
        if (received > readMaxBytes) {
          finish(tooLarge(readMaxBytes));
          return;
        }
        chunks.push(chunk);
      });
      stream.on("end", () => {
        // A stream cut off (reset, connection lost) still ends: only a whole answer counts.
        const cut =
          (stream.rstCode !== undefined && stream.rstCode !== NGHTTP2_NO_ERROR) ||
          (declaredLength !== undefined && declaredLength !== received);
        if (header && !cut) finish(undefined);
        else finish(lost());
      });
      stream.on("error", (error) => {
        if (!header && stream.rstCode === NGHTTP2_REFUSED_STREAM) {
          finish(new Refused("the daemon refused the call unprocessed", { cause: error }));
          return;
        }
        // The daemon holds as many requests as it allows (REQUEST_BUDGET_BYTES): reached, busy.
        if (stream.rstCode === NGHTTP2_ENHANCE_YOUR_CALM) {
          finish(busy());
          return;
        }
        finish(unreachable(error));
      });
      // Settled by then but for a stream closed without an answer: the error (with its stack) is
      // only made for that case, not on every call.
      stream.on("close", () => {
        if (!settled) finish(lost());
      });
      stream.end(body);
    });
  }

  abandonCalls(): void {
    this.abandoned = true;
    for (const fail of [...this.active]) fail(shuttingDown());
  }

  /** The current connection, checked with a ping after a long idle time, or a new one. */
  private async usable(
    signal: AbortSignal | undefined,
    deadlineAt: number | undefined,
  ): Promise<Link> {
    for (;;) {
      const link = this.current;
      if (!link) return this.connect();
      const { session } = link;
      if (session.closed || session.destroyed || link.opened >= MAX_STREAMS) {
        this.retire(link);
        return this.connect();
      }
      // A connection carrying calls is watched by the keep-alive pings instead.
      if (link.inFlight > 0 || Date.now() - link.lastUsed < this.keepAlive.idleMs) return link;
      // Calls arriving together after an idle time share one ping.
      if (!link.probe) {
        // Held open for the calls waiting on it, as a call in flight holds it.
        session.ref();
        const probe = answersPing(
          session,
          Math.min(this.keepAlive.timeoutMs, IDLE_PING_TIMEOUT_MS),
        );
        link.probe = probe;
        void probe.then(() => {
          link.probe = undefined;
          if (link.inFlight === 0) session.unref();
        });
      }
      // The call's abort and deadline end its wait; the check goes on for the others.
      const answered = await bounded(link.probe, signal, deadlineAt);
      // Replaced meanwhile (by another call, a GOAWAY or an error): look again.
      if (this.current !== link) continue;
      if (answered) {
        link.lastUsed = Date.now();
        return link;
      }
      session.destroy();
      this.forget(link);
    }
  }

  private connect(): Link {
    let socket: Socket | undefined;
    const session = http2.connect(this.origin, {
      maxSessionMemory: SESSION_MEMORY_MB,
      createConnection: (authority: URL) => {
        socket = openSocket(authority);
        return socket;
      },
    });
    const link: Link = {
      session,
      inFlight: 0,
      opened: 0,
      lastUsed: Date.now(),
      watch: undefined,
      probe: undefined,
    };
    const drop = () => this.forget(link);
    session.on("error", drop);
    session.on("goaway", drop);
    session.on("close", () => {
      drop();
      stopWatching(link);
    });
    // A connection that is not set up in time fails its calls (503) instead of waiting for TCP.
    const connecting = setTimeout(() => {
      if (session.connecting && !session.destroyed) {
        session.destroy(new Error("the daemon did not accept the connection in time"));
        // The session alone would leave the connect attempt running until the kernel gives up.
        socket?.destroy();
      }
    }, this.keepAlive.timeoutMs);
    connecting.unref();
    session.once("connect", () => clearTimeout(connecting));
    session.unref();
    this.current = link;
    return link;
  }

  /** Stops sending new calls on a connection: calls in flight on it finish, then it closes. */
  private retire(link: Link): void {
    this.forget(link);
    if (!link.session.closed && !link.session.destroyed) link.session.close();
  }

  private forget(link: Link): void {
    if (this.current === link) this.current = undefined;
  }

  private begin(link: Link): void {
    link.opened++;
    if (link.inFlight++ > 0) return;
    const { session } = link;
    session.ref();
    stopWatching(link);
    let pinging = false;
    let closingSince: number | undefined;
    link.watch = setInterval(() => {
      if (session.closed) {
        // Going away (Node sends no pings on a closing connection): its calls get a grace time.
        closingSince ??= Date.now();
        if (Date.now() - closingSince >= CLOSING_GRACE_FACTOR * this.keepAlive.timeoutMs) {
          session.destroy(
            new Error("the daemon's connection went away without finishing its calls"),
          );
        }
        return;
      }
      if (pinging) return;
      pinging = true;
      void answersPing(session, this.keepAlive.timeoutMs).then((answered) => {
        pinging = false;
        if (!answered && !session.destroyed) {
          session.destroy(new Error("the daemon's connection stopped answering pings"));
        }
      });
    }, this.keepAlive.intervalMs);
    link.watch.unref();
  }

  private end(link: Link): void {
    link.lastUsed = Date.now();
    if (--link.inFlight > 0) return;
    if (!link.probe) link.session.unref();
    stopWatching(link);
  }
}

/** A connection's socket, opened here so that an attempt to connect can be abandoned. */
function openSocket(authority: URL): Socket {
  const host = authority.hostname.replace(/^\[|\]$/g, "");
  if (authority.protocol === "https:") {
    return tlsConnect({
      host,
      port: Number(authority.port || 443),
      servername: isIP(host) ? undefined : host,
      ALPNProtocols: ["h2"],
    });
  }
  return netConnect({ host, port: Number(authority.port || 80) });
}

/** `promise`, or the call's cancellation or deadline if either comes first. */
function bounded<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  deadlineAt: number | undefined,
): Promise<T> {
  if (!signal && deadlineAt === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      done();
      reject(ConnectError.from(signal?.reason, Code.Canceled));
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort);
    if (deadlineAt !== undefined) {
      timer = setTimeout(() => {
        done();
        reject(deadlineExceeded());
      }, deadlineAt - Date.now());
    }
    void promise.then((value) => {
      done();
      resolve(value);
    });
  });
}

function stopWatching(link: Link): void {
  clearInterval(link.watch);
  link.watch = undefined;
}

/**
 * Whether a call that `session.request()` refused may go again: the connection was closing, gone
 * or told to go away, so nothing was sent. Anything else (a header HTTP/2 forbids) is the
 * gateway's own mistake and would fail the same way again.
 */
function sendable(session: http2.ClientHttp2Session, error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (
    session.closed ||
    session.destroyed ||
    code === "ERR_HTTP2_GOAWAY_SESSION" ||
    code === "ERR_HTTP2_INVALID_SESSION" ||
    code === "ERR_HTTP2_OUT_OF_STREAMS"
  );
}

/**
 * Whether a connection answers a ping within `timeoutMs`. A connection still being set up is not
 * judged (Node cancels a ping sent then; the connect timeout covers it), nor one with too many
 * pings outstanding already (Node refuses the ping at once, calling back with an error).
 */
function answersPing(session: http2.ClientHttp2Session, timeoutMs: number): Promise<boolean> {
  if (session.connecting) return Promise.resolve(true);
  return new Promise((resolve) => {
    // The verdict waits for the next turn of the loop: after a stall, an acknowledgement already
    // received is read before the timeout counts.
    const timer = setTimeout(() => setImmediate(() => resolve(false)), timeoutMs);
    timer.unref();
    let synchronous = true;
    try {
      const sent = session.ping((error) => {
        if (synchronous) return;
        clearTimeout(timer);
        resolve(!error);
      });
      synchronous = false;
      if (!sent) {
        clearTimeout(timer);
        resolve(true);
      }
    } catch {
      clearTimeout(timer);
      resolve(false);
    }
  });
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

function shuttingDown(): ConnectError {
  return new ConnectError("the gateway is shutting down", Code.Unavailable);
}

function deadlineExceeded(): ConnectError {
  return new ConnectError("the operation timed out", Code.DeadlineExceeded);
}

function tooLarge(readMaxBytes: number): ConnectError {
  return new ConnectError(
    `the daemon's answer is larger than readMaxBytes ${readMaxBytes}`,
    Code.Internal,
  );
}

/** The daemon went away before answering in full (reset, connection lost, shut down). */
function lost(): ConnectError {
  return marked(
    new ConnectError("the daemon closed the call without answering it", Code.Unavailable),
  );
}

/** Calls the daemon refused unread, as over its request budget: retried shortly, they may pass. */
const busyFailures = new WeakSet<ConnectError>();

function busy(): ConnectError {
  const error = new ConnectError(
    "the daemon holds as many requests as it allows",
    Code.Unavailable,
  );
  busyFailures.add(error);
  return error;
}

/**
 * Whether the daemon reset a call with ENHANCE_YOUR_CALM (over its request budget while the
 * request was still arriving, or a new stream its session would not take), so before carrying it
 * out: the gateway's answer asks for a retry (`Retry-After`), as its own body budget's does.
 * Node resets with the same code when this side's session passes its bound, after the daemon
 * answered; SESSION_MEMORY_MB keeps that bound above what the body budget lets queue.
 */
export function isDaemonBusy(error: unknown): boolean {
  return error instanceof ConnectError && busyFailures.has(error);
}

/** Failures of the connection to the daemon, as opposed to answers of a daemon that was reached. */
const connectionFailures = new WeakSet<ConnectError>();

function marked(error: ConnectError): ConnectError {
  connectionFailures.add(error);
  return error;
}

/**
 * Whether a call failed because the daemon could not be reached or was lost (not because it
 * answered, timed out or the gateway gave the call up): what the gateway's log warns of.
 */
export function isDaemonUnreachable(error: unknown): boolean {
  return error instanceof ConnectError && connectionFailures.has(error);
}

/**
 * A failure below the protocol: the daemon could not be reached or went away. The message names
 * the first failure (Node's stream errors repeat their cause in their own message, and a logger
 * would print the chain again); every address tried when there were several.
 */
function unreachable(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  return marked(
    new ConnectError(`the daemon could not be reached: ${firstFailure(error)}`, Code.Unavailable),
  );
}

/** The text of the failure that started `error`'s chain (exported for its tests). */
export function firstFailure(error: unknown): string {
  let root = error;
  const seen = new Set<unknown>();
  while (root instanceof Error && root.cause !== undefined && !seen.has(root)) {
    seen.add(root);
    root = root.cause;
  }
  const messageOf = (value: unknown) =>
    value instanceof Error
      ? value.message || String((value as { code?: unknown }).code ?? value.name)
      : String(value);
  // Several addresses refused (a host name with IPv4 and IPv6 addresses): Node's AggregateError
  // has an empty message and one error per address.
  if (root instanceof AggregateError && root.errors.length > 0) {
    return root.errors.map(messageOf).join("; ");
  }
  return messageOf(root) || messageOf(error);
}
