import type { ServerResponse } from "node:http";
import { isIP } from "node:net";
import { type CallOptions, type ContextValues, createContextValues } from "@connectrpc/connect";
import type { FastifyReply, FastifyRequest } from "fastify";
import { CallerHeaders, kRelayedClientIp } from "#daemon/auth/caller.js";
import { CallerPresence, kCallerPresence } from "#daemon/rpc/caller-presence.js";

/** decisions §2: the dashboard session cookie. */
export const SESSION_COOKIE = "consent_session";

const RATE_LIMIT_HEADERS = [
  ["x-ratelimit-limit", "X-RateLimit-Limit"],
  ["x-ratelimit-remaining", "X-RateLimit-Remaining"],
  ["x-ratelimit-reset", "X-RateLimit-Reset"],
] as const;

/** `203.0.113.7:4711` or `[2001:db8::7]:4711`, as some proxies write X-Forwarded-For entries. */
const WITH_PORT = /^(?:(\d{1,3}(?:\.\d{1,3}){3})|\[([0-9a-f:.]+)\])(?::\d{1,5})?$/i;

/**
 * The client address the limits count (spec 8): Fastify's, from X-Forwarded-For when the peer is
 * a trusted proxy (CONSENT_TRUST_PROXY). A port some proxies append is dropped, so a client is one
 * address whatever its source port; an entry that is no address at all (a proxy misconfigured)
 * counts as the proxy's own, so such requests share one count rather than each making its own.
 */
export function clientAddress(request: FastifyRequest): string {
  const address = request.ip;
  if (isIP(address)) return address;
  const [, v4, v6] = WITH_PORT.exec(address) ?? [];
  const bare = v4 ?? v6;
  if (bare !== undefined && isIP(bare)) return bare;
  return request.socket.remoteAddress ?? address;
}

/**
 * How a gateway hands a request's client address to its daemon, chosen once at start-up: in the
 * daemon's own process as a context value; across the network in a header, with the operator
 * token that makes the daemon trust it (daemon/auth/caller.ts). Each way carries only its own.
 */
export type Relay = { inProcess: true } | { inProcess: false; operatorToken: string };

const blank = (char: string | undefined) => char === " " || char === "\t";

/**
 * A cookie's name or value without the space and tab around it, which RFC 6265 §5.4 has a server
 * ignore. Counted off from each end, once: a trim by pattern tries the trailing run from every
 * blank, and a header of one long blank run inside a name held the event loop for most of a second.
 */
function cookieSpace(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && blank(text[start])) start++;
  while (end > start && blank(text[end - 1])) end--;
  return text.slice(start, end);
}

/**
 * Every distinct value of the dashboard session cookie (decisions §2) a request carries. Taken as
 * sent, not percent-decoded: the service's tokens never hold an escape, and a decoded stray
 * cookie (%E2%82%AC) would not fit a header; any other value is an unknown session (401). A value
 * in double quotes is read without them: RFC 6265 §4.1.1 allows them around any cookie value.
 * A browser sends the name more than once when cookies of other Domain or Path attributes were
 * set for the service's host, such as one a sibling subdomain set for the parent domain.
 */
export function sessionCookiesOf(request: FastifyRequest): string[] {
  const cookie = request.headers.cookie;
  // Most calls carry no cookie at all (an API key's): nothing to split.
  if (!cookie) return [];
  const values = new Set<string>();
  for (const pair of cookie.split(";")) {
    const equals = pair.indexOf("=");
    if (equals === -1 || cookieSpace(pair.slice(0, equals)) !== SESSION_COOKIE) continue;
    values.add(cookieSpace(pair.slice(equals + 1)).replace(/^"(.*)"$/s, "$1"));
  }
  return [...values];
}

/**
 * The dashboard session a request presents, if it presents one: none when it carries the cookie
 * with two different values, since nothing tells which of them the dashboard set
 * (gateway/v1/plugin.ts refuses such a request where a session is taken).
 */
export function sessionOf(request: FastifyRequest): string | undefined {
  const values = sessionCookiesOf(request);
  return values.length === 1 ? values[0] || undefined : undefined;
}

const kPresence = Symbol("consent.callerPresence");
type WatchedAnswer = ServerResponse & { [kPresence]?: CallerPresence };

/**
 * The presence of the client a read is answered to (daemon/rpc/caller-presence.ts), one per REST
 * request: told when its connection closes before the answer was written, or at once when it has
 * closed already (while the request waited its turn on the connection, gateway/app.ts). Added per
 * request: one small object and one listener, a function shared by all (no closure).
 */
function presenceOf(reply: FastifyReply): CallerPresence {
  const answer = reply.raw as WatchedAnswer;
  const known = answer[kPresence];
  if (known) return known;
  const presence = new CallerPresence();
  answer[kPresence] = presence;
  if (answer.destroyed || answer.socket?.destroyed) presence.leave();
  else answer.on("close", leaveIfUnanswered);
  return presence;
}

/** A response closed before it was written out whole: its client has gone. */
function leaveIfUnanswered(this: WatchedAnswer): void {
  if (!this.writableFinished) this[kPresence]?.leave();
}

/**
 * Call options that carry a REST request's credentials and client context to the daemon, and copy
 * the daemon's rate-limit figures onto the REST response (spec 8). For a write: it is carried out
 * once its request has arrived whole, whether or not its client waits for the answer (a consent
 * sent as its page closes), so nothing the daemon did is undone or left half done.
 */
export function relayOptions(
  request: FastifyRequest,
  reply: FastifyReply,
  relay: Relay,
): CallOptions {
  return callOptions(request, reply, relay, false);
}

/**
 * relayOptions for a read, a call that changes nothing: cancelled if its client leaves before the
 * answer, so the daemon stops work nobody will read (docs/behaviour.md, "A client that leaves").
 */
export function readOptions(
  request: FastifyRequest,
  reply: FastifyReply,
  relay: Relay,
): CallOptions {
  return callOptions(request, reply, relay, true);
}

function callOptions(
  request: FastifyRequest,
  reply: FastifyReply,
  relay: Relay,
  read: boolean,
): CallOptions {
  const clientIp = clientAddress(request);
  const headers: Record<string, string> = relay.inProcess
    ? {}
    : {
        [CallerHeaders.clientIp]: clientIp,
        [CallerHeaders.gatewayToken]: relay.operatorToken,
      };
  const authorization = request.headers.authorization;
  if (authorization) headers[CallerHeaders.authorization] = authorization;
  const session = sessionOf(request);
  if (session) headers[CallerHeaders.session] = session;
  if (request.headers.origin) headers[CallerHeaders.origin] = request.headers.origin;
  let contextValues: ContextValues | undefined;
  if (relay.inProcess) contextValues = createContextValues().set(kRelayedClientIp, clientIp);
  if (read) {
    contextValues ??= createContextValues();
    contextValues.set(kCallerPresence, presenceOf(reply));
  }
  return {
    headers,
    contextValues,
    onHeader(received) {
      for (const [name, restName] of RATE_LIMIT_HEADERS) {
        const value = received.get(name);
        if (value !== null) reply.header(restName, value);
      }
    },
  };
}

/** The request body as relayed to the daemon: the bytes received, empty when there were none. */
export function rawBody(request: FastifyRequest): Uint8Array {
  return Buffer.isBuffer(request.body) ? request.body : new Uint8Array(0);
}

/** The request's media type, without parameters, lower-case ("" when there is none). */
export function mediaTypeOf(request: FastifyRequest): string {
  return (request.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}
