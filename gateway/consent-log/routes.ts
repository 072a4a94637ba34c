import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { readOriginHeader } from "#daemon/consent-log/request-origin.js";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { failureOf, type HttpError } from "#gateway/errors.js";
import { refuseOtherMethods } from "#gateway/methods.js";
import { mediaTypeOf, type Relay, rawBody, relayOptions } from "#gateway/relay.js";

export interface ConsentLogRouteOptions {
  clients: DaemonClients;
  /** How requests reach the daemon with their client context (relay.ts). */
  relay: Relay;
}

/** spec 4.4: the log route's one address. */
export const LOG_ROUTE_PATH = "/api/consent/log";
const METHODS = ["POST", "OPTIONS"];
/** decisions §5: JSON, sent as application/json or as text/plain (sendBeacon's type). */
const LOG_MEDIA_TYPES = ["application/json", "text/plain"];
const WRONG_MEDIA_TYPE: HttpError = {
  status: 400,
  code: "invalid_request",
  message: "Content-Type must be application/json or text/plain",
  headers: {},
};

/** decisions §5: this route's errors are not enveloped: `{ success: false, error, code }`. */
export function logRouteErrorBody(error: HttpError): Record<string, unknown> {
  return {
    success: false,
    error: error.message,
    code: error.code ?? "internal_error",
    ...(error.details && { details: error.details }),
  };
}

function sendError(reply: FastifyReply, error: HttpError): FastifyReply {
  return reply.code(error.status).headers(error.headers).send(logRouteErrorBody(error));
}

function header(request: FastifyRequest, name: "origin" | "referer"): string {
  return request.headers[name] ?? "";
}

/**
 * The log route's CORS header fields for a request whose Origin header reads `origin` (decisions
 * §5): `Vary: Origin` on every answer, and the Origin echoed, so a page can read the answer, when
 * it is one origin as browsers write it: read as the daemon's domain check reads it
 * (readOriginHeader). Two origins (Node joins a repeated Origin into `a, b`) or one with a path is
 * no valid Access-Control-Allow-Origin (Fetch, CORS check); and `null` is never echoed: allowing
 * the opaque origin would allow every sandboxed frame and `file:` page, and a browser needs no
 * answer it can read to send a choice (sendBeacon's text/plain needs no preflight). Also for the
 * answers of requests the gateway cannot parse (gateway/route-families.ts).
 */
export function logRouteCorsHeaders(origin: string | undefined): Record<string, string> {
  if (origin === undefined || readOriginHeader(origin).kind !== "origin") return { Vary: "Origin" };
  return { Vary: "Origin", "Access-Control-Allow-Origin": origin };
}

/** The CORS header fields on an answer of the route; the preflight's own Vary is kept. */
function echoOrigin(request: FastifyRequest, reply: FastifyReply): void {
  for (const [name, value] of Object.entries(logRouteCorsHeaders(request.headers.origin))) {
    if (!reply.hasHeader(name)) reply.header(name, value);
  }
}

/**
 * POST /api/consent/log (spec 4.4, decisions §5): the banner runtime's choices, relayed verbatim
 * to the daemon, which limits, parses (application/json or text/plain, so sendBeacon works),
 * validates, checks the domain and stores. This plugin adds only CORS: the preflight, and the
 * request's Origin echoed with `Vary: Origin` on every answer, errors included, since the domain
 * check (not CORS) is what guards the route and needs the body.
 */
export async function consentLogRoutes(app: FastifyInstance, options: ConsentLogRouteOptions) {
  const { clients, relay } = options;
  // On every answer, however it came (the route, a refusal, an error), and in this one place.
  app.addHook("onSend", (request, reply, payload, done) => {
    echoOrigin(request, reply);
    done(null, payload);
  });
  // Also for a request refused before this plugin's hooks ran (gateway/request-rules.ts).
  app.setErrorHandler((error, request, reply) => sendError(reply, failureOf(request, error)));

  // The media type is checked before the body is read, so a missing or unparseable Content-Type
  // (which Fastify would refuse itself) gets the same answer as any other wrong one.
  const mediaTypeGate = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!LOG_MEDIA_TYPES.includes(mediaTypeOf(request))) return sendError(reply, WRONG_MEDIA_TYPE);
  };
  app.post(LOG_ROUTE_PATH, { onRequest: mediaTypeGate }, async (request, reply) => {
    const recorded = await clients.consentLog.recordConsent(
      {
        json: rawBody(request),
        requestOrigin: { origin: header(request, "origin"), referer: header(request, "referer") },
      },
      relayOptions(request, reply, relay),
    );
    return reply.code(200).send({
      success: true,
      consentLogId: recorded.consentLogId,
      ...(recorded.managePreferences && { managePreferences: recorded.managePreferences }),
    });
  });

  app.options(LOG_ROUTE_PATH, async (request, reply) =>
    reply
      .code(204)
      .headers({
        "Access-Control-Allow-Methods": METHODS.join(", "),
        "Access-Control-Allow-Headers":
          request.headers["access-control-request-headers"] ?? "Content-Type",
        "Access-Control-Max-Age": "86400",
        // The allowed headers echo the request's, so a cache must key the answer on them too.
        Vary: "Origin, Access-Control-Request-Headers",
      })
      .send(),
  );

  refuseOtherMethods(app, LOG_ROUTE_PATH, METHODS, sendError);
}
