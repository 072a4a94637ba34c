import { type IncomingMessage, METHODS, type ServerResponse, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Transport } from "@connectrpc/connect";
import {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  fastify,
  type HookHandlerDoneFunction,
  LogController,
} from "fastify";
import { bodyBudget } from "#gateway/body-budget.js";
import { createDaemonClients } from "#gateway/daemon-clients.js";
import { NO_SNIFF, sendEnvelopedError, setVersionHeaders } from "#gateway/envelope.js";
import { failureOf, type HttpError, noEndpoint, sendPlainError } from "#gateway/errors.js";
import { sendErrorPage } from "#gateway/preferences/routes.js";
import type { Relay } from "#gateway/relay.js";
import {
  awaitsGoAhead,
  continueWhenRead,
  handOverExpectations,
  holdToRequestRules,
} from "#gateway/request-rules.js";
import {
  errorAnswerAt,
  type FamilyAnswer,
  isPreferencesPath,
  isV1Path,
  jsonAnswer,
  V1_PREFIX,
} from "#gateway/route-families.js";
import { TokenWatch, watchToken } from "#gateway/token-watch.js";
import { type ParseFailure, unparsedRequest } from "#gateway/unparsed-request.js";
import { closeUnreachableLog, watchingDaemonAnswers } from "#gateway/unreachable-log.js";
import { v1Api } from "#gateway/v1/plugin.js";
import { visitorSide } from "#gateway/visitor.js";

/**
 * How long a client has to send a whole request (headers and body): a body that stops arriving
 * is answered 408 and its connection closed, instead of holding the socket (Node's default is
 * 5 minutes). Node checks every half of it, so the answer comes 30–45 s after the request began.
 */
export const REQUEST_TIMEOUT_MS = 30_000;

/**
 * A refused body (over a limit, unparsable) is answered on a connection that then closes. Closing
 * while the client is still sending makes the kernel reset the connection, and the client sees a
 * broken pipe instead of the answer; so the rest of the body is first read and dropped, up to
 * these bounds (a longer or slower upload gets the answer and the reset; one whose declared
 * length is over the bound gets it at once).
 */
const LINGER_MAX_BYTES = 16 * 1024 * 1024;
const LINGER_MAX_MS = 10_000;

/** Hard cap on any request body; each route's own rule (20 KB for subjects) is enforced by the daemon. */
export const GATEWAY_BODY_LIMIT = 1024 * 1024;

export interface GatewayOptions {
  /** How the gateway reaches the daemon: in-memory in one process, HTTP/2 when split. */
  transport: Transport;
  /** Relayed with the client IP so a daemon across the network trusts it (daemon/auth/caller.ts). */
  operatorToken: string;
  /** The transport calls the daemon in this process: the client IP goes as a context value. */
  inProcess?: boolean;
  /** CONSENT_TRUST_PROXY: proxies whose X-Forwarded-For names the client. */
  trustProxy: string[];
  logger: FastifyBaseLogger;
  /** CONSENT_GEO_HEADER: a trusted proxy's header naming the visitor's country (loader rules). */
  geoHeader?: string;
  /** CONSENT_LOADER_CACHE_MB in bytes: the loader responses kept in memory (loader-cache.ts). */
  loaderCacheBytes?: number;
  /**
   * Single-process mode: the daemon's publish hook, so loader responses refresh at once after a
   * change made through any worker or the daemon's own port.
   */
  onPublicChange?: (listener: (publicId: string) => void) => void;
  /** How long a client has to send a whole request; REQUEST_TIMEOUT_MS unless a test shortens it. */
  requestTimeoutMs?: number;
  /** Body bytes held at once over all connections; BODY_BUDGET_BYTES unless a test shrinks it. */
  bodyBudgetBytes?: number;
  /**
   * How often the outage lines of the daemon out of reach (unreachable-log.ts) and of loaders
   * served stale (stale-log.ts) tell a lasting outage: REPEATED_FAILURE_LOG_MS unless a test
   * shortens it.
   */
  repeatedFailureLogMs?: number;
}

/** Builds the gateway without listening: tests and main.ts share it. */
export async function buildGateway(options: GatewayOptions): Promise<FastifyInstance> {
  const requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const app = fastify({
    loggerInstance: options.logger,
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: options.trustProxy.length > 0 ? options.trustProxy : false,
    bodyLimit: GATEWAY_BODY_LIMIT,
    rewriteUrl: (request) => withoutTrailingSlash(originForm(request.url ?? "/")),
    // SIGTERM drains: idle keep-alive sockets close at once, requests already accepted finish
    // (startGateway bounds the wait). A request that arrives on a busy keep-alive socket meanwhile
    // is served like any other, and its answer closes the socket (`Connection: close`): Fastify's
    // own 503 for it would not be the API's envelope, and the daemon still serves until the
    // gateway is done.
    forceCloseConnections: "idle",
    return503OnClosing: false,
    frameworkErrors: unroutable,
    clientErrorHandler: answerUnreadable,
    requestTimeout: requestTimeoutMs,
    // A connection on which nothing moves for this long is closed: a client that sent requests
    // and reads none of the answers would otherwise hold them in memory for as long as it likes.
    connectionTimeout: 2 * requestTimeoutMs,
    // Node applies requestTimeout only when headersTimeout (default 60 s) is not longer. Node
    // would answer an HTTP/1.1 request without Host itself, with a bare 400: holdToRequestRules
    // answers it in the route's shape.
    http: {
      headersTimeout: requestTimeoutMs,
      requireHostHeader: false,
      connectionsCheckingInterval: Math.min(30_000, Math.ceil(requestTimeoutMs / 2)),
    },
  });
  // Every method Node parses (WebDAV's PROPFIND, MKCOL, …) reaches the router, so a path answers
  // the ones it does not serve with 405 and Allow (gateway/methods.ts) rather than 404.
  for (const method of METHODS) {
    if (method !== "CONNECT" && !app.supportedMethods.includes(method)) {
      app.addHttpMethod(method, { hasBody: true });
    }
  }
  app.server.on("connect", refuseConnect);
  handOverExpectations(app.server);
  app.addHook("onRequest", inTurnOnItsConnection);
  // Before the plugins are registered, so every route inherits them.
  app.addHook("onRequest", holdToRequestRules);
  // Every answer, the versioned API's and the log route's JSON with their errors, 404 and 405
  // included: one constant header, set as the answer goes out.
  app.addHook("onSend", (_request, reply, payload, done) => {
    reply.header(NO_SNIFF.name, NO_SNIFF.value);
    done(null, payload);
  });
  app.addHook("preParsing", continueWhenRead);
  app.addHook("preParsing", bodyBudget(options.bodyBudgetBytes));
  // Only a failure leaves a body unread (Fastify then answers with Connection: close), and onError
  // runs before the error handler answers: the linger costs a request that succeeds nothing.
  app.addHook("onError", (request, reply, _error, done) => {
    const lingers =
      !request.raw.complete &&
      reply.getHeader("connection") === "close" &&
      !(Number(request.headers["content-length"]) > LINGER_MAX_BYTES) &&
      !awaitsGoAhead(request.raw);
    if (lingers) void dropUnread(request.raw).then(() => done());
    else done();
  });
  // The daemon answering again ends an outage the log told of (unreachable-log.ts).
  const transport = watchingDaemonAnswers(
    options.transport,
    app.server,
    app.log,
    options.repeatedFailureLogMs,
  );
  // Once every request has been answered: a line held back is told now, not after the close.
  app.addHook("onClose", async () => closeUnreachableLog(app.server));
  const clients = createDaemonClients(transport);
  if (!options.inProcess) {
    const watch = new TokenWatch(transport, options.operatorToken, app.log);
    watchToken(app.server, watch);
    app.addHook("onClose", async () => watch.close());
  }
  const relay: Relay = options.inProcess
    ? { inProcess: true }
    : { inProcess: false, operatorToken: options.operatorToken };
  // Outside the versioned API (spec 9.2: /api/banners, /api/v2/...): a plain 404, no version
  // headers; under /preferences/ the page for an altered link (unknownOutsideV1).
  app.setNotFoundHandler(unknownOutsideV1);
  app.setErrorHandler((error, request, reply) => sendPlainError(reply, failureOf(request, error)));
  // The loader refreshes on the daemon's publish hook (one process) and on every banner edit or
  // publish this gateway relays, so a stand-alone gateway serves its own publishes at once too.
  const publicChangeListeners: ((publicId: string) => void)[] = [];
  const onPublicChange = (listener: (publicId: string) => void) => {
    publicChangeListeners.push(listener);
    options.onPublicChange?.(listener);
  };
  const onBannerWritten = (publicId: string) => {
    for (const listener of publicChangeListeners) listener(publicId);
  };
  await app.register(v1Api, {
    prefix: V1_PREFIX,
    clients,
    relay,
    onBannerWritten,
  });
  await app.register(visitorSide, {
    clients,
    relay,
    geoHeader: options.geoHeader,
    trustProxy: options.trustProxy,
    loaderCacheBytes: options.loaderCacheBytes,
    repeatedFailureLogMs: options.repeatedFailureLogMs,
    onPublicChange,
  });
  // An unknown path is answered before its body is read or judged (a malformed Content-Type
  // would be a 415, a QUERY without one a 400). Added after the plugins, which therefore do not
  // inherit it: the versioned API answers its own unknown paths (v1/plugin.ts).
  app.addHook("onRequest", async (request, reply) => {
    if (request.is404) return unknownOutsideV1(request, reply);
  });
  return app;
}

/**
 * The answers of one connection not yet written out, in the order of their requests, and the
 * requests waiting for their turn.
 */
interface ConnectionTurns {
  answers: ServerResponse[];
  waiting: HookHandlerDoneFunction[];
}
const kTurns = Symbol("consent.connectionTurns");
type TurnedSocket = Socket & { [kTurns]?: ConnectionTurns };

/**
 * HTTP/1.1 pipelining: requests a client sends one after another on a connection are served one
 * after another, each once the answer before it has been written out (its `close`). Node parses
 * every request of a packet at once and would run them all, holding each answer until the
 * client reads the ones before it: 300 banner lists of 3 MB sent in one write, by a client that
 * reads nothing, took a process past its 4 GB heap. So a connection holds at most one answer the
 * client has not read (and connectionTimeout closes one on which nothing moves, dropping the
 * requests still waiting on it). A request alone on its connection, as nearly all are, goes on
 * at once.
 */
function inTurnOnItsConnection(
  request: FastifyRequest,
  reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const socket = request.raw.socket as TurnedSocket;
  const turns = socket[kTurns] ?? { answers: [], waiting: [] };
  socket[kTurns] = turns;
  const answer = reply.raw;
  answer.once("close", () => {
    turns.answers.splice(turns.answers.indexOf(answer), 1);
    // A connection gone (closed by its client, or for want of reading) has no one to answer:
    // the requests still waiting on it are dropped, not run for nobody.
    if (socket.destroyed) turns.waiting.length = 0;
    else turns.waiting.shift()?.();
  });
  turns.answers.push(answer);
  if (turns.answers.length === 1) done();
  else turns.waiting.push(done);
}

/**
 * The answer a connection is writing, or is next to write: the first of its requests' answers
 * not yet written out (inTurnOnItsConnection serves them one after another, in their order).
 */
function answerOnTheWire(socket: Socket): ServerResponse | undefined {
  return (socket as TurnedSocket)[kTurns]?.answers[0];
}

/** Reads what is left of a request body and drops it, within the linger bounds. */
function dropUnread(raw: IncomingMessage): Promise<void> {
  // Nothing more can arrive on a request already ended or torn down (its events have fired).
  if (raw.readableEnded || raw.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > LINGER_MAX_BYTES) finish();
    };
    // Unref'd: a lingering upload never keeps a process that is shutting down alive.
    const timer = setTimeout(finish, LINGER_MAX_MS).unref();
    function finish() {
      clearTimeout(timer);
      raw.off("data", onData).off("end", finish).off("error", finish).off("close", finish);
      resolve();
    }
    raw.on("data", onData).once("end", finish).once("error", finish).once("close", finish);
    // Away from the body reader (the budget's counting stream): its full buffer would pause the
    // request again, and what is left is only to be dropped.
    raw.unpipe();
    raw.resume();
  });
}

/**
 * A request Node cannot parse (malformed request line or header, headers over 16 KB) or that took
 * longer than REQUEST_TIMEOUT_MS: no route answers it, so it is answered here, in the shape of
 * the route family its path names (errorAnswerAt: the preferences page's failure page, the log
 * route's body with its CORS headers, the versioned API's envelope, the plain one) when its
 * request line can be read (unparsedRequest), else in spec 7's envelope; without the version
 * headers of a route's answer (spec 9.4), and the connection is closed (Fastify's
 * clientErrorHandler). As Node would, nothing is written where an answer to an earlier request on
 * the connection has begun: it would land inside that answer, which goes out whole instead. Then
 * the connection reads nothing more, and closes once that answer has gone (or, where its client
 * reads nothing, at the connection timeout).
 */
function answerUnreadable(error: ParseFailure, socket: Socket) {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [status, message] =
    error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "The request was not received in time"]
      : error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "The request headers are too large"]
        : [400, "The request could not be read"];
  if (answerOnTheWire(socket)?.headersSent) {
    // Nothing more is read: each byte a client sends after it would count as the connection
    // moving and hold the answer past the connection timeout, however little of it is read.
    socket.pause();
    socket.end();
    socket.once("finish", () => socket.destroy());
    return;
  }
  // A request whose head was read and whose body was not is one the router has.
  const reading = (socket as TurnedSocket)[kTurns]?.answers.find((answer) => !answer.req.complete);
  const request = unparsedRequest(error, reading?.req);
  const path = originForm(request?.target ?? "").split("?")[0] ?? "";
  const failure = { status, message, code: "invalid_request", headers: {} };
  answerOnSocket(socket, status, errorAnswerAt(request && { ...request, path }, failure));
  socket.destroy(error);
}

/**
 * CONNECT, which Node hands to no route: its target is a host and port, not a resource of the
 * gateway, which is no proxy. 405 with an empty `Allow` (RFC 9110 10.2.1: that target allows no
 * method), in the plain shape, and the connection closed, rather than a connection dropped
 * without a word.
 */
function refuseConnect(_request: IncomingMessage, socket: Duplex) {
  const refusal = {
    error: "Method CONNECT is not allowed: this is not a proxy",
    code: "method_not_allowed",
  };
  answerOnSocket(socket, 405, jsonAnswer(refusal, { Allow: "" }));
  socket.destroy();
}

/**
 * Writes a whole answer, with the header fields Node gives its own (`Date`, RFC 9110 6.6.1), on a
 * socket no route owns; the caller closes it.
 */
function answerOnSocket(socket: Duplex, status: number, answer: FamilyAnswer) {
  if (!socket.writable) return;
  const fields = Object.entries(answer.headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.write(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nDate: ${new Date().toUTCString()}\r\n${fields.join("")}Content-Length: ${Buffer.byteLength(answer.body)}\r\nConnection: close\r\n\r\n${answer.body}`,
  );
}

/** What an altered preferences link gets (the daemon's link_invalid, decisions §5). */
const LINK_INVALID: HttpError = {
  status: 403,
  code: "link_invalid",
  message: "This link is not valid",
  headers: {},
};

/**
 * A request the router cannot match (Fastify's frameworkErrors): a path whose percent-encoding
 * does not decode, or a path segment over Fastify's 100-character parameter limit. No resource
 * has such an address, so each family answers as for a path it does not serve, never with
 * Fastify's own text: the versioned API with its envelope and version headers (decisions §6), a
 * preferences link with the page for an altered link, anything else with the plain 404.
 */
function unroutable(_error: unknown, request: FastifyRequest, reply: FastifyReply) {
  // Answered outside the routes' context: the app's onSend hook does not run for it.
  reply.header(NO_SNIFF.name, NO_SNIFF.value);
  const path = request.url.split("?")[0] ?? "";
  if (isV1Path(path)) {
    setVersionHeaders(reply);
    return sendEnvelopedError(reply, noEndpoint(request));
  }
  return unknownOutsideV1(request, reply);
}

/**
 * A path outside the versioned API that nothing serves: under /preferences/ a link altered past
 * its token (a segment added, `/preferences/{token}/` from a mail client) gets the page for an
 * altered link, as a changed token does (decisions §5: a clear page); anything else the plain 404.
 */
function unknownOutsideV1(request: FastifyRequest, reply: FastifyReply) {
  const path = request.url.split("?")[0] ?? "";
  if (isPreferencesPath(path)) return sendErrorPage(reply, LINK_INVALID);
  return sendPlainError(reply, noEndpoint(request));
}

/**
 * RFC 9112 3.2.2: a request target in absolute-form (`GET http://host/api/v1/banners/`, as a
 * client configured for a proxy writes it) names the resource its path and query name in
 * origin-form. It is read as that path and query, so each family's rules (the trailing slash,
 * the envelope of an unreadable v1 path, the page of an altered preferences link) see the path
 * the client meant. Any other target (`*`, or one Node already refused) is left as it is.
 */
function originForm(url: string): string {
  if (url.startsWith("/")) return url;
  const schemeAndAuthority = /^[a-z][a-z\d+.-]*:\/\/[^/?#]*/i.exec(url)?.[0];
  if (schemeAndAuthority === undefined) return url;
  const rest = url.slice(schemeAndAuthority.length);
  return rest.startsWith("/") ? rest : `/${rest}`;
}

/**
 * Under the versioned API a trailing slash is ignored: `/api/v1/banners/` is the banner list, not
 * a banner with an empty id (docs/behaviour.md). Other paths (the loader, the log route, the
 * preferences page) keep theirs, so they answer only at their exact address.
 */
export function withoutTrailingSlash(url: string): string {
  const queryAt = url.indexOf("?");
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  if (!path.startsWith(`${V1_PREFIX}/`) || !path.endsWith("/")) return url;
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.length > V1_PREFIX.length
    ? trimmed + (queryAt === -1 ? "" : url.slice(queryAt))
    : url;
}
