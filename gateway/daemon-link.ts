import http2 from "node:http2";
import { isIP, connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { BODY_BUDGET_BYTES } from "#gateway/body-budget.js";
import { startBound } from "#gateway/bound-timer.js";

/**
 * How a connection to the daemon is kept checked (DaemonTransportOptions.keepAlive): pinged every
 * `intervalMs` while calls are in flight, given up when a ping goes `timeoutMs` unanswered, and
 * pinged before it carries a call after `idleMs` without one.
 */
export interface KeepAlive {
  intervalMs: number;
  timeoutMs: number;
  idleMs?: number;
  /**
   * The daemon's drain limit (CONSENT_DRAIN_TIMEOUT_MS): a connection it told to go away carries
   * calls it may still answer until then, and it cuts the connection itself at that limit.
   */
  drainMs?: number;
}

/** The keep-alive of a transport given none: 5 s, 10 s, 60 s. */
export const DEFAULT_KEEP_ALIVE = { intervalMs: 5_000, timeoutMs: 10_000, idleMs: 60_000 };

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

/**
 * A connection going away (told by the daemon, or replaced) cannot be pinged (Node refuses a ping
 * on a closing session): the calls still on it are given up this many keep-alive timeouts after it
 * began closing, or a keep-alive timeout after the daemon's drain limit, whichever is later. A
 * draining daemon answers them, or cuts the connection, within its limit; only one lost silently
 * on the network meanwhile is left to this bound.
 */
const CLOSING_GRACE_FACTOR = 3;

/** How long the calls on a connection going away are waited for (CLOSING_GRACE_FACTOR). */
export function closingGraceMs(keepAlive: Pick<KeepAlive, "timeoutMs" | "drainMs">): number {
  const { timeoutMs, drainMs = 0 } = keepAlive;
  return Math.max(CLOSING_GRACE_FACTOR * timeoutMs, drainMs + timeoutMs);
}
/** How long the ping after an idle time may take before the connection counts as gone. */
const IDLE_PING_TIMEOUT_MS = 2_000;

/**
 * One HTTP/2 connection to the daemon and what is known of its use: what DaemonConnection
 * (daemon-connection.ts) picks a connection for each call by, and what the checks below keep up.
 */
export interface Link {
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
 * Opens a connection to the daemon at `origin`, unreferenced (it keeps the process alive only
 * while calls hold it). `onGone` is told once it errs, is told to go away or closes; one not set
 * up within `connectTimeoutMs` is destroyed, failing its calls (503) instead of waiting for TCP.
 */
export function openLink(origin: string, connectTimeoutMs: number, onGone: () => void): Link {
  let socket: Socket | undefined;
  const session = http2.connect(origin, {
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
  session.on("error", onGone);
  session.on("goaway", onGone);
  session.on("close", () => {
    onGone();
    stopWatching(link);
  });
  const connecting = setTimeout(() => {
    if (session.connecting && !session.destroyed) {
      session.destroy(new Error("the daemon did not accept the connection in time"));
      // The session alone would leave the connect attempt running until the kernel gives up.
      socket?.destroy();
    }
  }, connectTimeoutMs);
  connecting.unref();
  session.once("connect", () => clearTimeout(connecting));
  session.unref();
  return link;
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

/**
 * Pings a connection every `intervalMs` from its first call in flight on, so that one dying
 * silently under its calls fails them (503) instead of leaving them waiting for TCP to give up;
 * one going away is given closingGraceMs to finish them. The caller
 * stops it (stopWatching) once the last call settles.
 */
export function startWatching(link: Link, keepAlive: KeepAlive): void {
  const { session } = link;
  stopWatching(link);
  let pinging = false;
  let closingSince: number | undefined;
  link.watch = setInterval(() => {
    if (session.closed) {
      // Going away (Node sends no pings on a closing connection): its calls get a grace time.
      closingSince ??= Date.now();
      if (Date.now() - closingSince >= closingGraceMs(keepAlive)) {
        session.destroy(new Error("the daemon's connection went away without finishing its calls"));
      }
      return;
    }
    if (pinging) return;
    pinging = true;
    void answersPing(session, keepAlive.timeoutMs).then((answered) => {
      pinging = false;
      if (!answered && !session.destroyed) {
        session.destroy(new Error("the daemon's connection stopped answering pings"));
      }
    });
  }, keepAlive.intervalMs);
  link.watch.unref();
}

/** Ends a connection's pings (startWatching): its calls have settled, or it closed. */
export function stopWatching(link: Link): void {
  clearInterval(link.watch);
  link.watch = undefined;
}

/**
 * Whether a connection idle for a long time still answers: one ping (at most IDLE_PING_TIMEOUT_MS)
 * shared by every call arriving meanwhile, so a connection a NAT or load balancer dropped silently
 * costs one ping, not a hung request. The connection is held open while the calls wait on it.
 */
export function probeAfterIdle(link: Link, keepAlive: KeepAlive): Promise<boolean> {
  if (link.probe) return link.probe;
  const { session } = link;
  // Held open for the calls waiting on it, as a call in flight holds it.
  session.ref();
  const probe = answersPing(session, Math.min(keepAlive.timeoutMs, IDLE_PING_TIMEOUT_MS));
  link.probe = probe;
  void probe.then(() => {
    link.probe = undefined;
    if (link.inFlight === 0) session.unref();
  });
  return probe;
}

/**
 * Whether a connection answers a ping within `timeoutMs`. A connection still being set up is not
 * judged (Node cancels a ping sent then; the connect timeout covers it), nor one with too many
 * pings outstanding already (Node refuses the ping at once, calling back with an error).
 */
function answersPing(session: http2.ClientHttp2Session, timeoutMs: number): Promise<boolean> {
  if (session.connecting) return Promise.resolve(true);
  return new Promise((resolve) => {
    // After a stall, an acknowledgement already received is read before the timeout counts.
    const cancel = startBound(timeoutMs, () => resolve(false));
    let synchronous = true;
    try {
      const sent = session.ping((error) => {
        if (synchronous) return;
        cancel();
        resolve(!error);
      });
      synchronous = false;
      if (!sent) {
        cancel();
        resolve(true);
      }
    } catch {
      cancel();
      resolve(false);
    }
  });
}
