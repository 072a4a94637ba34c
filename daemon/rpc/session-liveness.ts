import type { Http2Server, ServerHttp2Session, ServerHttp2Stream } from "node:http2";

/**
 * How often the daemon's port looks for connections that have stopped: one whose PING has gone
 * unanswered for this long is destroyed, 2 to 3 times this after it stopped. Long enough for a
 * client whose event loop a long task or collection holds (grpc-js waits 20 s for a keepalive
 * answer), short enough to free a broken connection's descriptor within a bound.
 */
export const SESSION_PROBE_MS = 30_000;

/**
 * How long a connection may carry no call before the daemon closes it (GOAWAY NO_ERROR), as
 * grpc-go's MaxConnectionIdle counts: the only bound on a client that connects, answers PINGs and
 * does nothing else. A connection with a call open, however quiet (a health watch), is not idle:
 * after a GOAWAY Node sends no PING, so a client that then vanished would never be seen to.
 */
export const IDLE_SESSION_MS = 72_000;

/** What the last look saw of a connection, and since when it has carried no call. */
interface LastLook {
  bytesRead: number;
  pinged: boolean;
  openCalls: number;
  /** performance.now() when its last call ended, or it opened; meaningless with a call open. */
  idleSince: number;
}

const ignoreAnswer = () => {};

/**
 * RFC 9113 §5.4.1: after the GOAWAY of a connection error the endpoint MUST close the TCP
 * connection. nghttp2 sends that GOAWAY itself (a frame past SETTINGS_MAX_FRAME_SIZE, a second
 * preface, a header block that does not decode) and Node 20 stops reading the socket, but neither
 * closes it nor tells: no 'error', 'goaway', 'frameError' or 'sessionError' (those come for the
 * errors Node ends a session on itself, and it destroys those at once). Such a connection would
 * hold its descriptor and session until it went idle, and for good with a call open on it (a
 * health watch never ends). Nothing but an unanswered frame tells it from a quiet connection: so
 * every `probeMs` a connection that has received nothing since the last look is sent a PING, and
 * one that has received nothing since its PING, not even the answer every HTTP/2 client sends
 * unprompted, is destroyed with its calls. A connection that never sent the preface, or only the
 * preface, is closed the same way. At the first look after it has carried no call for `idleMs`,
 * a connection is closed (GOAWAY NO_ERROR; with no call on it, at once).
 *
 * Per call, a count of the connection's open calls; one timer for the port, and per connection
 * each interval a look at its count of bytes read; a busy connection is never pinged, a quiet one
 * every other interval.
 */
export function superviseSessions(
  server: Http2Server,
  { probeMs, idleMs }: { probeMs: number; idleMs: number },
): void {
  const sessions = new Map<ServerHttp2Session, LastLook>();
  server.on("session", (session: ServerHttp2Session) => {
    const last = {
      bytesRead: session.socket.bytesRead,
      pinged: false,
      openCalls: 0,
      idleSince: performance.now(),
    };
    sessions.set(session, last);
    session.on("stream", (stream: ServerHttp2Stream) => {
      last.openCalls++;
      stream.once("close", () => {
        if (--last.openCalls === 0) last.idleSince = performance.now();
      });
    });
    session.once("close", () => sessions.delete(session));
  });
  const look = setInterval(() => {
    const now = performance.now();
    for (const [session, last] of sessions) {
      if (session.destroyed) continue;
      if (last.openCalls === 0 && now - last.idleSince >= idleMs) {
        session.close();
        continue;
      }
      const bytesRead = session.socket.bytesRead;
      if (bytesRead !== last.bytesRead) {
        last.bytesRead = bytesRead;
        last.pinged = false;
      } else if (last.pinged) {
        session.destroy();
      } else {
        last.pinged = session.ping(ignoreAnswer);
      }
    }
  }, probeMs);
  look.unref();
  server.once("close", () => clearInterval(look));
}
