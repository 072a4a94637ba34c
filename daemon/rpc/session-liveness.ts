import type { Http2Server, ServerHttp2Session } from "node:http2";

/**
 * How often the daemon's port looks for connections that have stopped: one whose PING has gone
 * unanswered for this long is destroyed, 2 to 3 times this after it stopped. Long enough for a
 * client whose event loop a long task or collection holds (grpc-js waits 20 s for a keepalive
 * answer), short enough to free a broken connection's descriptor within a bound.
 */
export const SESSION_PROBE_MS = 30_000;

/**
 * How long a connection may carry no call and no frame before the daemon closes it (GOAWAY, then
 * the socket once its calls have ended): Fastify's `http2SessionTimeout`, named here because it is
 * the only bound on a client that connects, answers PINGs and does nothing else.
 */
export const IDLE_SESSION_MS = 72_000;

/** What the last look saw of a connection. */
interface LastLook {
  bytesRead: number;
  pinged: boolean;
}

const ignoreAnswer = () => {};

/**
 * RFC 9113 §5.4.1: after the GOAWAY of a connection error the endpoint MUST close the TCP
 * connection. nghttp2 sends that GOAWAY itself (a frame past SETTINGS_MAX_FRAME_SIZE, a second
 * preface, a header block that does not decode) and Node 20 stops reading the socket, but neither
 * closes it nor tells: no 'error', 'goaway', 'frameError' or 'sessionError' (those come for the
 * errors Node ends a session on itself, and it destroys those at once). Such a connection would
 * hold its descriptor and session until IDLE_SESSION_MS, not seeing the client leave, and for
 * good with a call open on it (a health watch never ends). Nothing but an unanswered frame tells
 * it from a quiet connection: so every `intervalMs` a connection that has received nothing since
 * the last look is sent a PING, and one that has received nothing since its PING, not even the
 * answer every HTTP/2 client sends unprompted, is destroyed with its calls. A connection that
 * never sent the preface, or only the preface, is closed the same way.
 *
 * Nothing per call: one timer for the port, and per connection each interval a look at its count
 * of bytes read; a busy connection is never pinged, a quiet one every other interval.
 */
export function destroyUnresponsiveSessions(server: Http2Server, intervalMs: number): void {
  const sessions = new Map<ServerHttp2Session, LastLook>();
  server.on("session", (session: ServerHttp2Session) => {
    sessions.set(session, { bytesRead: session.socket.bytesRead, pinged: false });
    session.once("close", () => sessions.delete(session));
  });
  const look = setInterval(() => {
    for (const [session, last] of sessions) {
      if (session.destroyed) continue;
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
  }, intervalMs);
  look.unref();
  server.once("close", () => clearInterval(look));
}
