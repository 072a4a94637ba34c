import { setMaxListeners } from "node:events";
import {
  constants,
  type Http2Server,
  type Http2ServerResponse,
  type ServerHttp2Stream,
} from "node:http2";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { fastify, LogController } from "fastify";
import type { Logger } from "pino";
import { createAdminService } from "#daemon/admin/admin-service.js";
import { Authenticator } from "#daemon/auth/authenticator.js";
import { kPeerAddress } from "#daemon/auth/caller.js";
import { sharedSecret } from "#daemon/auth/secrets.js";
import { createBannerService } from "#daemon/banners/banner-service.js";
import { type Clock, systemClock } from "#daemon/clock.js";
import { DEFAULT_DRAIN_TIMEOUT_MS } from "#daemon/config.js";
import { createConsentLogService } from "#daemon/consent-log/consent-log-service.js";
import { BEFORE_CUT_MS, boundedDrain } from "#daemon/drain-exit.js";
import { createHealthService } from "#daemon/health/health-service.js";
import type { IdentityKey } from "#daemon/identity/subject-identity.js";
import { SubjectIdentity } from "#daemon/identity/subject-identity.js";
import { ClientIpHasher, FixedWindowLimiter } from "#daemon/limits/rate-limiter.js";
import { deadlinePassed, hasPassedDeadline } from "#daemon/rpc/call-deadline.js";
import { createCallRefusal } from "#daemon/rpc/call-refusal.js";
import { domainErrorInterceptor } from "#daemon/rpc/connect-errors.js";
import { serveConnectUnary } from "#daemon/rpc/connect-unary-route.js";
import { encodeGrpcMessageAsProtocolSays } from "#daemon/rpc/grpc-message.js";
import { createServiceTable } from "#daemon/rpc/in-process-transport.js";
import { answeringParseFailuresAsInvalid } from "#daemon/rpc/parse-failures.js";
import {
  IDLE_SESSION_MS,
  SESSION_PROBE_MS,
  superviseSessions,
} from "#daemon/rpc/session-liveness.js";
import { answerUnknownProcedures, routableUrl } from "#daemon/rpc/unknown-procedures.js";
import { withReadCache } from "#daemon/store/read-cache.js";
import type { Store } from "#daemon/store/store.js";
import { createSubjectService } from "#daemon/subjects/subject-service.js";
import { utf8JsonDecoder } from "#daemon/validation/json-body.js";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { WebhookDispatcher } from "#daemon/webhooks/dispatcher.js";
import { type Load, LoadGauge } from "#daemon/webhooks/load-gauge.js";
import { type ResealOutcome, resealWebhookSecrets } from "#daemon/webhooks/reseal-secrets.js";
import { WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { createWebhookService } from "#daemon/webhooks/webhook-service.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { Health } from "#gen/grpc/health/v1/health_pb.js";

/** The largest message the daemon reads: every REST body limit fits well inside it. */
export const DAEMON_READ_MAX_BYTES = 1024 * 1024;

export interface DaemonOptions {
  store: Store;
  operatorToken: string;
  identityKeys: readonly IdentityKey[];
  /** CONSENT_BASE_URL: its origin is the only one a session-authenticated write may carry. */
  baseUrl: string;
  logger: Logger;
  clock?: Clock;
  /**
   * Webhook delivery: CONSENT_WEBHOOK_ALLOW_CIDRS, how often the dispatcher polls the store,
   * CONSENT_WEBHOOK_LEASE_MS, and how long an attempt or test send may take (default
   * DELIVERY_TIMEOUT_MS, docs/webhooks.md; shorter only where a test waits one out).
   */
  webhooks?: {
    allowCidrs?: readonly string[];
    pollIntervalMs?: number;
    leaseMs?: number;
    deliveryTimeoutMs?: number;
  };
  /** The load webhook delivery yields to; by default this process's (LoadGauge). */
  load?: Load;
  /** Called after each write of a key, team or banner, whose cached reads other processes drop. */
  onCachedWrite?: () => void;
}

/** Everything the daemon serves, as Connect routes usable by a server or an in-memory transport. */
export interface Daemon {
  routes: (router: ConnectRouter) => void;
  interceptors: Interceptor[];
  /** Subscribes to banners whose public side changed (publish, edit), so loader caches refresh. */
  onPublicChange(listener: (publicId: string) => void): void;
  /**
   * Told of a change another process made to a banner, key or team (relayed between the workers
   * of `npm start`): drops this daemon's cached reads so its next read, e.g. for the loader or a
   * key's check, sees it.
   */
  forgetCachedReads(): void;
  /** Delivers webhook events; listenDaemon starts it and stops it when the server closes. */
  dispatcher: WebhookDispatcher;
  /**
   * Seals the stored webhook signing secrets that open only under an older identity key anew
   * under the current one (reseal-secrets.ts); run at start-up during a rotation.
   */
  resealWebhookSecrets(): Promise<ResealOutcome>;
}

/** Wires the services over one store: the composition every way of running the daemon shares. */
export function createDaemon(options: DaemonOptions): Daemon {
  const clock = options.clock ?? systemClock;
  // Keys, teams and banners read by every request come from a short-lived cache (read-cache.ts).
  const store = withReadCache(options.store, { onWrite: options.onCachedWrite });
  const identity = new SubjectIdentity(options.identityKeys);
  const secret = (purpose: string) =>
    sharedSecret((p) => identity.derivedSecret(p), options.operatorToken, purpose);
  /**
   * Every secret for `purpose` a daemon of the store may have used, the current one (`secret`)
   * first: each identity key's (a rotation lists the older ones after it), then the operator
   * token's, which serves while there is no identity key.
   */
  const keyring = (purpose: string) => [
    ...identity.derivedSecrets(purpose),
    sharedSecret(() => null, options.operatorToken, purpose),
  ];
  const limiter = new FixedWindowLimiter(store.counters, clock);
  // Client IPs are hashed under a secret every daemon on the store shares (decisions §2).
  const ipHasher = new ClientIpHasher(secret("consent.v1 client ip"));
  const authenticator = new Authenticator({
    store,
    limiter,
    ipHasher,
    clock,
    operatorToken: options.operatorToken,
    baseOrigin: new URL(options.baseUrl).origin,
  });
  const services = { store, authenticator, clock };
  const webhookGuard = new AddressGuard(options.webhooks?.allowCidrs ?? []);
  // Endpoint secrets are sealed under keys every daemon on the store derives alike: each identity
  // key (current first, so rotation keeps old secrets readable), then the operator token's.
  const webhookSecrets = new WebhookSecretBox(keyring("consent.v1 webhook secrets"));
  // Deliveries yield to the calls this process serves while they saturate it.
  const gauge = new LoadGauge();
  const dispatcher = new WebhookDispatcher({
    store: services.store,
    clock,
    guard: webhookGuard,
    secrets: webhookSecrets,
    logger: options.logger,
    pollIntervalMs: options.webhooks?.pollIntervalMs,
    leaseMs: options.webhooks?.leaseMs,
    deliveryTimeoutMs: options.webhooks?.deliveryTimeoutMs,
    load: options.load ?? gauge,
  });
  const names = [
    BannerService,
    SubjectService,
    ConsentLogService,
    AdminService,
    WebhookService,
  ].map((s) => s.typeName);
  const publicChangeListeners: ((publicId: string) => void)[] = [];
  const onPublicChange = (publicId: string) => {
    for (const listener of publicChangeListeners) listener(publicId);
  };
  const consentLog = createConsentLogService({
    ...services,
    limiter,
    ipHasher,
    baseUrl: options.baseUrl,
    linkSecrets: keyring("consent.v1 preferences link"),
  });
  const bannerService = createBannerService({
    ...services,
    baseUrl: options.baseUrl,
    onPublicChange,
  });
  const subjectService = createSubjectService({ ...services, identity });
  const adminService = createAdminService(services);
  const webhookService = createWebhookService({
    ...services,
    guard: webhookGuard,
    secrets: webhookSecrets,
    deliveryTimeoutMs: options.webhooks?.deliveryTimeoutMs,
  });
  const healthService = createHealthService(
    options.store,
    names,
    (service) => service === SubjectService.typeName && !identity.available,
  );
  return {
    interceptors: [gauge.interceptor, domainErrorInterceptor(options.logger, store)],
    dispatcher,
    resealWebhookSecrets: () => resealWebhookSecrets(store.webhooks, webhookSecrets, clock),
    onPublicChange(listener) {
      publicChangeListeners.push(listener);
    },
    forgetCachedReads: () => store.forgetCachedReads(),
    // One implementation of each service, whichever protocol or transport a call comes by (the
    // short Connect routes, connect-es' plugin, `npm start`'s in-process transport): their queues
    // and locks (a team's banner lists, a banner's edits) are the daemon process's, one each.
    routes(router) {
      router.service(BannerService, bannerService);
      router.service(ConsentLogService, consentLog);
      router.service(SubjectService, subjectService);
      router.service(AdminService, adminService);
      router.service(WebhookService, webhookService);
      router.service(Health, healthService);
    },
  };
}

export interface ListenOptions {
  host: string;
  port: number;
  logger: Logger;
  /** How long a call's request has to arrive whole; REQUEST_ARRIVAL_MS unless a test shortens it. */
  requestArrivalMs?: number;
  /** Request bytes held at once over all connections; REQUEST_BUDGET_BYTES unless a test shrinks it. */
  requestBudgetBytes?: number;
  /** How often connections that stopped answering are looked for; SESSION_PROBE_MS unless a test shortens it. */
  sessionProbeMs?: number;
  /** How long a connection may carry no call before it is closed; IDLE_SESSION_MS unless a test shortens it. */
  idleSessionMs?: number;
  /** The bound of closing's drain: CONSENT_DRAIN_TIMEOUT_MS, else DEFAULT_DRAIN_TIMEOUT_MS. */
  drainTimeoutMs?: number;
}

/**
 * Request bytes one daemon process holds at once, over all its connections: what the streams
 * still open have received. A request is read before any credential is checked, and streams per
 * connection are bounded but connections are not, so without this many connections could make
 * the process hold as much as they care to send. A stream whose data would pass it is reset with
 * ENHANCE_YOUR_CALM (gRPC clients read RESOURCE_EXHAUSTED; a stand-alone gateway answers 503).
 * One gateway holds as much at most (BODY_BUDGET_BYTES); several sharing one daemon may meet it.
 */
export const REQUEST_BUDGET_BYTES = 256 * 1024 * 1024;

/**
 * Streams one connection may have open at once. Node's default sets no bound, and each stream may
 * hold up to DAEMON_READ_MAX_BYTES of a request before any credential is checked.
 */
export const MAX_STREAMS_PER_CONNECTION = 256;
/**
 * How long a call's request may take to arrive whole (END_STREAM), as the gateway's
 * REQUEST_TIMEOUT_MS for a REST request: every method takes one request message, so a request
 * still arriving after that is stalled, and its stream is reset (CANCEL) with what it buffered.
 */
export const REQUEST_ARRIVAL_MS = 30_000;

/** How long resetOnceAnswered waits, at most, for an answer's END_STREAM to be written. */
const ANSWER_FLUSH_MS = 1_000;

/**
 * RFC 9113 §8.1: an answer that ended before its request did (a message past readMaxBytes is
 * refused from its envelope, unread) is followed by RST_STREAM NO_ERROR, so the client stops
 * sending rather than wait for REQUEST_ARRIVAL_MS. Only once nghttp2 has written the answer's
 * END_STREAM (state.localClose): a reset submitted earlier closes the stream in nghttp2 at once,
 * and the trailers (gRPC) or the empty DATA frame ending a Connect answer, still queued, are
 * dropped. Node tells of no frame written, so this looks again on the next turns of the event
 * loop (the write is a native immediate), then every few milliseconds while the client's
 * flow-control window holds the last frame back. The stream is destroyed with the reset: closed
 * with NO_ERROR, Node keeps a stream whose unread request data nobody reads open for good.
 */
function resetOnceAnswered(stream: ServerHttp2Stream, turns = 0): void {
  if (stream.destroyed || stream.closed) return;
  const { localClose, remoteClose } = stream.state;
  if (remoteClose) return;
  if (localClose) {
    stream.close(constants.NGHTTP2_NO_ERROR);
    stream.destroy();
    return;
  }
  if (turns < 3) setImmediate(resetOnceAnswered, stream, turns + 1);
  else if (turns < 3 + ANSWER_FLUSH_MS / 10) setTimeout(resetOnceAnswered, 10, stream, turns + 1);
}

/**
 * Ends the wait of a write a closed stream will never let through. A server stream (an export, a
 * tail) whose client stopped reading waits for its answer's 'drain' (HTTP/2 flow control) before
 * its handler is asked for the next message; when the client then resets the stream, Node's
 * compatibility response tells of it by 'close' alone, neither 'drain' nor 'error', so the write
 * waited for good, and the handler, suspended at its message, never ran its `finally`: its
 * place among the streams a team may run at once stayed taken until the daemon restarted. A
 * 'drain' on close lets connect-es write again, which fails on the closed stream as a cancelled
 * call (ERR_HTTP2_INVALID_STREAM, read as ABORTED), and the handler ends.
 */
function endWritesOnClose(response: Http2ServerResponse): void {
  // `on`, not `once`: a response closes once, and `once` would wrap the listener in a new
  // function on every call the daemon serves.
  response.on("close", drainUnended);
}

/** endWritesOnClose's listener, one function for every response (no closure per call). */
function drainUnended(this: Http2ServerResponse): void {
  if (!this.writableEnded) this.emit("drain");
}

/**
 * REQUEST_BUDGET_BYTES at work: each stream's request bytes are counted as they enter its buffer
 * (its push) and given back once the request has been read whole (a server stream, a health
 * watch, runs on long after) or the stream has closed, whichever comes first. Not with a 'data'
 * listener: that would set the stream flowing before the handler reads it, and the chunks read
 * meanwhile would reach the counter alone. A chunk that would pass the budget resets its stream.
 */
function requestBudget(budgetBytes: number): (stream: ServerHttp2Stream) => void {
  let heldBytes = 0;
  return (stream) => {
    let received = 0;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      heldBytes -= received;
    };
    stream.once("end", release);
    stream.once("close", release);
    const push = stream.push;
    stream.push = function counted(chunk: unknown, encoding?: BufferEncoding) {
      if (Buffer.isBuffer(chunk)) {
        if (stream.closed || released) return false;
        if (heldBytes + chunk.length > budgetBytes) {
          stream.close(constants.NGHTTP2_ENHANCE_YOUR_CALM);
          return false;
        }
        heldBytes += chunk.length;
        received += chunk.length;
      }
      return push.call(this, chunk, encoding);
    };
  };
}

/**
 * What one connection's HTTP/2 session may hold, in Node's unit for `maxSessionMemory` (10^6
 * bytes). Node counts the answers queued on a connection while the client's flow control holds
 * them back, and past its default, 10, refuses every new stream (RST_STREAM ENHANCE_YOUR_CALM)
 * and after 100 refusals ends the connection with every call on it: a stand-alone gateway relaying
 * a burst of banner edits (each answered with its banner, up to 256 KB) lost calls the daemon had
 * carried out; 256 such edits at once queued about 54 MB. The bound stays, a little over twice
 * that, since connections to this port are not counted: it caps what a client that reads no
 * answers makes a connection hold.
 */
export const SESSION_MEMORY_MB = 128;

/** The request message encodings the daemon reads besides identity (connect-es' own default). */
const ACCEPTED_COMPRESSION = [compressionGzip, compressionBrotli];
const ACCEPTED_ENCODINGS = ["identity", ...ACCEPTED_COMPRESSION.map((c) => c.name)].join(",");

/**
 * How long calls may still run after closing begins before their context signal is aborted: at
 * most this, and at most half the drain's bound, so a handler that watches its signal is told
 * before the cut under a short CONSENT_DRAIN_TIMEOUT_MS too.
 */
const CALL_SHUTDOWN_MS = 5_000;

/**
 * Serves the daemon on one h2c port: gRPC, gRPC-Web and Connect (decisions §7). Closing drains
 * in-flight calls within CONSENT_DRAIN_TIMEOUT_MS, as the gateway's drain is: Fastify sends every
 * HTTP/2 session GOAWAY and ends it once its calls finish, but the server closes only when each
 * client has closed its side of the connection, which a client that hangs never does, and a call
 * may never finish. So a connection on which the client has sent nothing is closed at once, calls
 * still running after CALL_SHUTDOWN_MS see their signal aborted, and whatever remains at the
 * deadline is cut (Node 20 keeps HTTP/2 sessions open).
 */
export async function listenDaemon(daemon: Daemon, options: ListenOptions) {
  // Fastify hands `http` to http2.createServer too (lib/server.js), but types it for HTTP/1 only.
  const http2ServerOptions: object = { http: { maxSessionMemory: SESSION_MEMORY_MB } };
  const app = fastify({
    http2: true,
    ...http2ServerOptions,
    forceCloseConnections: true,
    // Idle connections are closed by superviseSessions, which counts open calls: Fastify's
    // timeout sends GOAWAY on one whose only call is quiet, after which Node sends it no PING.
    http2SessionTimeout: 0,
    loggerInstance: options.logger,
    logController: new LogController({ disableRequestLogging: true }),
    rewriteUrl: (request) => routableUrl(request.url ?? "/"),
  });
  // No body is Fastify's to read: connect-es reads every call's own, and answers a content type
  // of no RPC protocol (a form, XML, text) with the protocol's bare 415, unread, as a call without
  // one. Fastify's parsers would read it first and answer their own JSON (FST_ERR_CTP_…).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, _payload, done) => done(null, undefined));
  const server = app.server as unknown as Http2Server;
  server.updateSettings({ maxConcurrentStreams: MAX_STREAMS_PER_CONNECTION });
  superviseSessions(server, {
    probeMs: options.sessionProbeMs ?? SESSION_PROBE_MS,
    idleMs: options.idleSessionMs ?? IDLE_SESSION_MS,
  });
  const arrivalMs = options.requestArrivalMs ?? REQUEST_ARRIVAL_MS;
  const countRequestBytes = requestBudget(options.requestBudgetBytes ?? REQUEST_BUDGET_BYTES);
  server.on("stream", (stream: ServerHttp2Stream) => {
    if (stream.endAfterHeaders) return;
    countRequestBytes(stream);
    const stalled = setTimeout(() => {
      if (!stream.destroyed && !stream.state.remoteClose) stream.close(constants.NGHTTP2_CANCEL);
    }, arrivalMs);
    stream.once("close", () => clearTimeout(stalled));
    // An answer may end before its request has (a message past readMaxBytes is refused from its
    // envelope): once the answer's last frame (END_STREAM) is out, RST_STREAM NO_ERROR tells the
    // client to stop sending (RFC 9113 §8.1). Not before: nghttp2 drops the trailers, or the empty
    // DATA frame that ends a Connect answer, still queued behind a reset.
    stream.once("finish", () => resetOnceAnswered(stream));
  });
  const refuse = createCallRefusal();
  app.addHook("onRequest", (request, reply, done) => {
    endWritesOnClose(reply.raw as unknown as Http2ServerResponse);
    const type = request.headers["content-type"];
    const grpcFamily = type?.startsWith("application/grpc") === true;
    if (grpcFamily && !type?.startsWith("application/grpc-web")) {
      encodeGrpcMessageAsProtocolSays(reply.raw as unknown as Http2ServerResponse);
      // The gRPC protocol's compression rule: an answer names the message encodings the server
      // reads, so a client sending one it does not (deflate) is refused UNIMPLEMENTED once, and
      // a client that reads the header (grpc-js) sends its later calls uncompressed.
      reply.raw.setHeader("grpc-accept-encoding", ACCEPTED_ENCODINGS);
    }
    if (hasPassedDeadline(request.headers, grpcFamily) && request.method === "POST") {
      refuse(request, reply, deadlinePassed());
    }
    done();
  });
  // Every call in flight links its signal to this one: more than ten at once is normal, not a
  // listener leak (connect-es removes each link when its call ends).
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const contextValues = (request: { ip: string }) =>
    createContextValues().set(kPeerAddress, request.ip);
  // The gateway's calls (binary Connect unary) take the short way; everything else is connect-es'.
  const table = createServiceTable({ routes: daemon.routes, interceptors: daemon.interceptors });
  serveConnectUnary(app, {
    table,
    readMaxBytes: DAEMON_READ_MAX_BYTES,
    contextValues,
    shutdownSignal: shutdown.signal,
  });
  // A call to a procedure no route serves is answered UNIMPLEMENTED in its own protocol.
  answerUnknownProcedures(app, table.serves, refuse);
  // connect-es' JSON codec reads text with the decoder its options name (their type omits it);
  // unknown fields are ignored, connect-es' default, as protobuf binary skips them.
  const jsonOptions = { ignoreUnknownFields: true, textDecoder: utf8JsonDecoder };
  await app.register(fastifyConnectPlugin, {
    routes: answeringParseFailuresAsInvalid(daemon.routes),
    acceptCompression: ACCEPTED_COMPRESSION,
    interceptors: daemon.interceptors,
    readMaxBytes: DAEMON_READ_MAX_BYTES,
    jsonOptions,
    shutdownSignal: shutdown.signal,
    contextValues,
  });
  // Webhook delivery stops claiming work as the drain begins (preClose) and its stop is awaited
  // before the store is closed.
  app.addHook("onClose", () => daemon.dispatcher.stop());
  const drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
  const beginDrain = boundedDrain(app.server, drainTimeoutMs);
  app.addHook("preClose", (done) => {
    beginDrain();
    // No attempt starts during the drain, to be cut moments later and sent again: the attempts in
    // flight run on, and the work left in the store (events of records acknowledged during the
    // drain, retries) is due for another daemon at once, or this one after its restart. An
    // attempt may take 15 s (DELIVERY_TIMEOUT_MS), longer than the drain: those still waiting on
    // their endpoints are cut a moment before the drain's own cut and given back, due at once, so
    // the process closes its store and exits within CONSENT_DRAIN_TIMEOUT_MS. Not boundedDrain's
    // beforeCut, which a server closed early (no connection left) cancels: the attempts may
    // outlast the server.
    void daemon.dispatcher.stop({ cutAfterMs: drainTimeoutMs - BEFORE_CUT_MS });
    const abortCalls = setTimeout(
      () => shutdown.abort(new ConnectError("the daemon is shutting down", Code.Unavailable)),
      Math.min(CALL_SHUTDOWN_MS, drainTimeoutMs / 2),
    );
    app.server.once("close", () => clearTimeout(abortCalls));
    done();
  });
  await app.listen({ host: options.host, port: options.port });
  await daemon.dispatcher.start();
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  return {
    app,
    port,
    url: `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${port}`,
  };
}
