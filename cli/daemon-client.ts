import type { Http2Session } from "node:http2";
import { type Client, createClient, type Interceptor } from "@connectrpc/connect";
import {
  createGrpcTransport,
  Http2SessionManager,
  type Http2SessionOptions,
} from "@connectrpc/connect-node";
import { CallerHeaders } from "#daemon/auth/caller.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { Health } from "#gen/grpc/health/v1/health_pb.js";

/** How long one call may take before the operator is told the daemon did not answer. */
export const CALL_TIMEOUT_MS = 10_000;

export interface DaemonClientOptions {
  /** The daemon's h2c URL (CONSENT_DAEMON_URL or --daemon). */
  url: string;
  /** Operator token; unset for calls that need none (health). */
  token?: string;
  /** Receives one line per call and outcome when --debug is on. */
  log?: (line: string) => void;
  /** The time limit of a call that is not a stream; CALL_TIMEOUT_MS unless a test sets it. */
  callTimeoutMs?: number;
}

/** Typed clients for every daemon service the CLI uses, over one shared HTTP/2 session. */
export interface DaemonClient {
  readonly url: string;
  readonly admin: Client<typeof AdminService>;
  readonly health: Client<typeof Health>;
  /** BannerService as an operator acting for one team (the daemon reads `consent-team`). */
  banners(teamId: string): Client<typeof BannerService>;
  /** SubjectService as an operator acting for one team. */
  subjects(teamId: string): Client<typeof SubjectService>;
  /**
   * ConsentLogService as an operator acting for one team. `untimed` drops the per-call time
   * limit (the connection is still checked with pings): a tail runs until Ctrl-C, an export as
   * long as its rows take, and a listing or a count as long as the store reads, which is the
   * daemon's to bound (CONSENT_MONGODB_TIMEOUT_MS a read on MongoDB, CONSENT_LOG_READ_TIMEOUT_MS
   * on the embedded store, past which it answers `query_too_broad`: a call limit as long as that
   * would cut the answer off).
   */
  logs(teamId: string, options?: { untimed?: boolean }): Client<typeof ConsentLogService>;
  /** WebhookService as an operator acting for one team. */
  webhooks(teamId: string): Client<typeof WebhookService>;
  /** The `date` header of the latest response, for the doctor's clock-skew check. */
  lastServerDate(): Date | undefined;
  /** Closes the HTTP/2 session so the process can exit at once. */
  close(): void;
}

/**
 * Creates the CLI's connection to the daemon: gRPC over h2c with the operator token as
 * `authorization: Bearer` metadata on every call (daemon/auth/caller.ts reads it there).
 */
export function createDaemonClient(options: DaemonClientOptions): DaemonClient {
  const callTimeoutMs = options.callTimeoutMs ?? CALL_TIMEOUT_MS;
  // A stream has no time limit, so a daemon that stops answering (stopped, its host gone, a port
  // that accepts and says nothing) would hold a tail or an export for ever: while a stream
  // waits, the connection is checked with a PING after the same time, and one unanswered for
  // three times as long (a daemon busy for a while still answers) ends it with its calls.
  const sessionManager = new GuardedSessionManager(options.url, options.log, {
    pingIntervalMs: callTimeoutMs,
    pingTimeoutMs: 3 * callTimeoutMs,
  });
  let serverDate: Date | undefined;
  const remember = (headers: Headers) => {
    const date = new Date(headers.get("date") ?? "");
    if (!Number.isNaN(date.getTime())) serverDate = date;
  };
  /** `limited: false` for streams: no time limit at all (an undefined one would be the default). */
  const transportFor = (teamId?: string, { limited = true } = {}) =>
    createGrpcTransport({
      baseUrl: options.url,
      sessionManager,
      defaultTimeoutMs: limited ? callTimeoutMs : undefined,
      interceptors: [credentials(options.token, teamId), observe(remember, options.log)],
    });
  const operatorTransport = transportFor();
  return {
    url: options.url,
    admin: createClient(AdminService, operatorTransport),
    health: createClient(Health, operatorTransport),
    banners: (teamId) => createClient(BannerService, transportFor(teamId)),
    subjects: (teamId) => createClient(SubjectService, transportFor(teamId)),
    logs: (teamId, { untimed = false } = {}) =>
      createClient(ConsentLogService, transportFor(teamId, { limited: !untimed })),
    webhooks: (teamId) => createClient(WebhookService, transportFor(teamId)),
    lastServerDate: () => serverDate,
    close: () => sessionManager.abort(),
  };
}

/**
 * An Http2SessionManager that keeps an 'error' listener on each HTTP/2 session for the session's
 * whole life. A peer that is not the daemon (an HTTP/1.1 port) fails the call and then, once the
 * socket closes, emits a second 'error' on the session; connect-node has removed its listeners by
 * then (abort() after the failed call), and an 'error' with no listener ends the process. The
 * call has already failed with that error, so here it is only noted under --debug.
 */
class GuardedSessionManager extends Http2SessionManager {
  private readonly guarded = new WeakSet<Http2Session>();

  constructor(
    url: string,
    private readonly log?: (line: string) => void,
    options?: Http2SessionOptions,
  ) {
    super(url, options);
  }

  override async request(...args: Parameters<Http2SessionManager["request"]>) {
    const stream = await super.request(...args);
    const session = stream.session;
    if (session && !this.guarded.has(session)) {
      this.guarded.add(session);
      session.on("error", (error: Error) => {
        // The CLI's own close at the end of a command is no failure.
        if (!this.closing) this.log?.(`HTTP/2 session failed: ${error.message}`);
      });
    }
    return stream;
  }

  private closing = false;

  override abort(reason?: Error): void {
    this.closing = true;
    super.abort(reason);
  }
}

/** Adds the operator token and, for team-scoped calls (banners, subjects, logs, webhooks), the team the operator acts for. */
function credentials(token: string | undefined, teamId: string | undefined): Interceptor {
  return (next) => (request) => {
    if (token !== undefined) request.header.set(CallerHeaders.authorization, `Bearer ${token}`);
    if (teamId !== undefined) request.header.set(CallerHeaders.team, teamId);
    return next(request);
  };
}

/** Notes the server's clock from each answer and, with --debug, logs the call and its outcome. */
function observe(remember: (headers: Headers) => void, log?: (line: string) => void): Interceptor {
  return (next) => async (request) => {
    const started = performance.now();
    const name = `${request.service.typeName}/${request.method.name}`;
    log?.(`→ ${name} ${request.url}`);
    try {
      const response = await next(request);
      remember(response.header);
      log?.(`← ${name} ok in ${Math.round(performance.now() - started)} ms`);
      return response;
    } catch (error) {
      const metadata = (error as { metadata?: unknown }).metadata;
      if (metadata instanceof Headers) remember(metadata);
      log?.(`← ${name} failed in ${Math.round(performance.now() - started)} ms`);
      throw error;
    }
  };
}
