import type { IncomingMessage, Server } from "node:http";
import type {
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  RequestPayload,
} from "fastify";
import { type HttpError, RefusedRequest } from "#gateway/errors.js";

/**
 * Where a request with an `Expect` header stands (RFC 9110 10.1.1): `awaiting` the `100 Continue`
 * before its client sends the body, `continued` once told to go on, `forgone` when its route
 * answers without the body, `unmet` for an expectation other than 100-continue.
 */
type Expectation = "awaiting" | "continued" | "forgone" | "unmet";
const expectations = new WeakMap<IncomingMessage, Expectation>();

/**
 * Node hands requests carrying `Expect` to these listeners instead of answering them itself (it
 * would send `100 Continue` at once, or a bare 417): both go to the routes like any request, and
 * the rules below answer them.
 */
export function handOverExpectations(server: Server): void {
  server.on("checkContinue", (request: IncomingMessage, response) => {
    expectations.set(request, "awaiting");
    server.emit("request", request, response);
  });
  server.on("checkExpectation", (request: IncomingMessage, response) => {
    expectations.set(request, "unmet");
    server.emit("request", request, response);
  });
}

/**
 * The header of those a request may carry once that it carries twice, if any: Node keeps the first
 * `Host` and the first `Authorization`, where a proxy in front may read the last, so the two
 * would judge different hosts or credentials (RFC 9112 3.2: a second Host is a 400).
 */
function headerGivenTwice(rawHeaders: readonly string[]): string | undefined {
  let host = 0;
  let authorization = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 4 && name.toLowerCase() === "host") host += 1;
    else if (name.length === 13 && name.toLowerCase() === "authorization") authorization += 1;
  }
  if (host > 1) return "Host";
  return authorization > 1 ? "Authorization" : undefined;
}

/**
 * RFC 9112 3.2 and RFC 3986 3.2.2-3.2.3: a Host value is `uri-host [ ":" port ]`, the host an IP
 * literal in brackets or a reg-name (unreserved characters, sub-delims and percent-escapes, which
 * an IPv4 address is too; empty is allowed), the port digits. No user info, path, space or
 * unbalanced bracket.
 */
const VALID_HOST =
  /^(?:\[(?:[\da-f:.]+|v[\da-f]+\.[\w\-.~!$&'()*+,;=:]+)\]|(?:[\w\-.~!$&'()*+,;=]|%[\da-f]{2})*)(?::\d*)?$/i;

/**
 * Whether a Transfer-Encoding names a coding other than chunked: Node frames such a body by its
 * final `chunked` and hands the rest over undecoded (`gzip, chunked` would reach the route as
 * gzip bytes). Empty list members are ignored (RFC 9110 5.6.1).
 */
function codingNotImplemented(transferEncoding: string | undefined): boolean {
  if (transferEncoding === undefined) return false;
  const codings = transferEncoding
    .split(",")
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== "");
  return codings.length !== 1 || codings[0] !== "chunked";
}

/**
 * A refusal of the rules below, answered in the route family's shape (RefusedRequest), on a
 * connection that then closes: a message this malformed says its client, or a proxy in front,
 * reads HTTP otherwise than Node does, so nothing more read on that connection can be trusted
 * to be framed as its sender meant (nor, unread, its body to be where Node thinks it ends).
 */
function refusal(status: number, message: string): HttpError {
  return { status, code: "invalid_request", message, headers: { Connection: "close" } };
}

/**
 * The rule of the message itself a request breaks, if any (each refusal closes the connection):
 * - RFC 9112 3.2: an HTTP/1.1 request without `Host`, or any with `Host` twice or with a value
 *   that names no host (VALID_HOST), is a 400, and so is `Authorization` twice (headerGivenTwice).
 * - RFC 9112 6.1: an HTTP/1.0 request carrying Transfer-Encoding has faulty framing (HTTP/1.0
 *   has no transfer codings, so a proxy in front may frame its body otherwise): a 400, as for a
 *   body that cannot be read, where Node would read it as chunked and keep the connection.
 * - RFC 9112 6.1: a transfer coding the gateway does not implement. RFC 9112 asks for 501, but
 *   spec 7 has no 501 and tells clients to retry a 5xx, where this request fails however often
 *   it is sent: 400, as for a body that cannot be read. A proxy in front may frame such a body
 *   otherwise than Node does.
 * - RFC 9110 10.1.1: an expectation other than 100-continue cannot be met: 417 (spec 7 has no
 *   417; no other status says it). Its client may or may not send the body it announced.
 */
function brokenRule(raw: IncomingMessage): HttpError | undefined {
  if (raw.headers.host === undefined && raw.httpVersion === "1.1") {
    return refusal(400, "The request has no Host header");
  }
  const twice = headerGivenTwice(raw.rawHeaders);
  if (twice !== undefined) return refusal(400, `The request carries more than one ${twice} header`);
  if (raw.headers.host !== undefined && !VALID_HOST.test(raw.headers.host)) {
    return refusal(400, "The request's Host header names no valid host");
  }
  if (raw.headers["transfer-encoding"] !== undefined && raw.httpVersion === "1.0") {
    return refusal(400, "An HTTP/1.0 request cannot carry Transfer-Encoding");
  }
  if (codingNotImplemented(raw.headers["transfer-encoding"])) {
    return refusal(400, "The only transfer coding accepted is chunked");
  }
  if (expectations.get(raw) === "unmet") {
    return refusal(417, "The only expectation accepted is 100-continue");
  }
  return undefined;
}

/**
 * An onRequest hook holding every route to the rules of the message itself (brokenRule), before
 * any family's own hooks and before the body is read. It goes on synchronously, as the hooks
 * after it always have: an answer they send at once (a 404) still goes before Node parses
 * whatever the client sent next on the connection.
 */
export function holdToRequestRules(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const broken = brokenRule(request.raw);
  done(broken === undefined ? undefined : new RefusedRequest(broken));
}

/** Whether a request's declared body is over its route's limit: a 413 before anything else. */
function declaredOverLimit(request: FastifyRequest): boolean {
  return Number(request.headers["content-length"]) > request.routeOptions.bodyLimit;
}

/**
 * A preParsing hook that sends `100 Continue` when a route is about to read the body it awaits
 * (RFC 9110 10.1.1), and only then: a request answered before its body is read (an unknown path,
 * a method the path does not serve, a credential refused by its form, a body declared over the
 * route's limit) is never sent, and Node closes its connection after the answer.
 */
export function continueWhenRead(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: RequestPayload,
  done: (error: Error | null, payload: RequestPayload) => void,
): void {
  if (expectations.get(request.raw) === "awaiting" && !declaredOverLimit(request)) {
    reply.raw.writeContinue();
    expectations.set(request.raw, "continued");
  }
  done(null, payload);
}

/**
 * A route answers this request without its body, if its client still awaits `100 Continue` and
 * `answeredWithoutBody` says so (asked of no other request): it is never sent, and the body is
 * not read (the framing headers are dropped, so Fastify reads none). A request whose client sends
 * its body unasked is read as any other, and one whose body is declared over the limit gets the
 * 413 it gets without `Expect` (continueWhenRead).
 */
export function forgoBodyIfAwaited(
  request: FastifyRequest,
  answeredWithoutBody: (request: FastifyRequest) => boolean,
): void {
  if (expectations.get(request.raw) !== "awaiting" || declaredOverLimit(request)) return;
  if (!answeredWithoutBody(request)) return;
  expectations.set(request.raw, "forgone");
  delete request.headers["content-length"];
  delete request.headers["transfer-encoding"];
}

/** Whether the client may still be waiting to be told to send its body, which may never come. */
export function awaitsGoAhead(raw: IncomingMessage): boolean {
  const expectation = expectations.get(raw);
  return expectation !== undefined && expectation !== "continued";
}
