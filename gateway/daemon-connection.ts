import type http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { deadlinePassed } from "#daemon/rpc/call-deadline.js";
import { Refused, shuttingDown, unreachable } from "#gateway/daemon-failures.js";
import {
  DEFAULT_KEEP_ALIVE,
  type KeepAlive,
  type Link,
  openLink,
  probeAfterIdle,
  startWatching,
  stopWatching,
} from "#gateway/daemon-link.js";
import { type Call, type FailCall, type Reply, readReply } from "#gateway/daemon-stream.js";

/**
 * A client opens at most 2^30 streams on one connection (odd IDs below 2^31); the connection is
 * replaced well before it runs out.
 */
const MAX_STREAMS = 2 ** 30 - 2 ** 20;

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
export class DaemonConnection {
  readonly pathPrefix: string;
  private readonly origin: string;
  /** The connection new calls go on. */
  private current: Link | undefined;
  /** How to fail each call in flight, on any connection. */
  private readonly active = new Set<FailCall>();
  /** Set by abandonCalls: every call from then on fails at once. */
  private abandoned = false;

  private readonly keepAlive: KeepAlive & { idleMs: number };

  constructor(baseUrl: string, keepAlive: KeepAlive) {
    this.keepAlive = { ...keepAlive, idleMs: keepAlive.idleMs ?? DEFAULT_KEEP_ALIVE.idleMs };
    const url = new URL(baseUrl);
    this.origin = url.origin;
    this.pathPrefix = url.pathname.replace(/\/+$/, "");
  }

  /** Sends a call and reads its answer, once more if the daemon refused it unprocessed. */
  async exchange(call: Call): Promise<Reply> {
    // Calls that start after the shutdown gave the others up, or were waiting to be sent.
    if (this.abandoned) throw shuttingDown();
    // One deadline for the whole call: the connection check and a second attempt count in it.
    const deadlineAt = call.timeoutMs === undefined ? undefined : Date.now() + call.timeoutMs;
    const send = async () => {
      const link = await this.usable(call.signal, deadlineAt);
      const left = deadlineAt === undefined ? undefined : deadlineAt - Date.now();
      if (left !== undefined && left <= 0) throw deadlinePassed();
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

  /** Fails every call in flight, and every call from now on, with UNAVAILABLE. */
  abandonCalls(): void {
    this.abandoned = true;
    for (const fail of [...this.active]) fail(shuttingDown());
  }

  private async attempt(link: Link, call: Call): Promise<Reply> {
    // Given up by a shutdown while the connection was being checked.
    if (this.abandoned) throw shuttingDown();
    // Aborted, or its client gone, while the connection was being checked, or before the second
    // attempt.
    if (call.signal?.aborted) throw ConnectError.from(call.signal.reason, Code.Canceled);
    if (call.presence?.left) throw call.presence.left;
    const { session } = link;
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(call.headers, { endStream: false });
    } catch (error) {
      if (!sendable(session, error)) {
        throw new ConnectError(`the call could not be sent: ${String(error)}`, Code.Internal);
      }
      // Nothing was sent (the connection is closing or going away): the call may go again.
      this.retire(link);
      throw new Refused("the connection could not carry the call", { cause: error });
    }
    this.begin(link);
    return readReply(stream, call, this.active, () => this.end(link));
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
      // Calls arriving together after an idle time share one ping. The call's abort and deadline
      // end its wait; the check goes on for the others.
      const answered = await bounded(probeAfterIdle(link, this.keepAlive), signal, deadlineAt);
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
    const link = openLink(this.origin, this.keepAlive.timeoutMs, () => this.forget(link));
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
    link.session.ref();
    startWatching(link, this.keepAlive);
  }

  private end(link: Link): void {
    link.lastUsed = Date.now();
    if (--link.inFlight > 0) return;
    if (!link.probe) link.session.unref();
    stopWatching(link);
  }
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
        reject(deadlinePassed());
      }, deadlineAt - Date.now());
    }
    void promise.then((value) => {
      done();
      resolve(value);
    });
  });
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
