import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { bearerOf } from "#daemon/auth/caller.js";
import { parseApiKey } from "#daemon/keys/api-key-format.js";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendEnvelopedError, setVersionHeaders } from "#gateway/envelope.js";
import { failureOf, type HttpError, noEndpoint } from "#gateway/errors.js";
import { type Relay, sessionCookiesOf, sessionOf } from "#gateway/relay.js";
import { forgoBodyIfAwaited } from "#gateway/request-rules.js";
import { bannerRoutes } from "#gateway/v1/banners/routes.js";
import { healthRoutes } from "#gateway/v1/health/routes.js";
import { credentialNeeded } from "#gateway/v1/methods.js";
import { subjectRoutes } from "#gateway/v1/subjects/routes.js";
import { webhookRoutes } from "#gateway/v1/webhooks/routes.js";

export interface V1Options {
  clients: DaemonClients;
  /** How requests reach the daemon with their client context (relay.ts). */
  relay: Relay;
  /** Told the public ID of a banner this gateway edited or published (its loader refreshes). */
  onBannerWritten: (publicId: string) => void;
}

/**
 * Whether a request is refused by its credential before the daemon would read its body (decisions
 * §2: the credential is judged first), whatever the store holds, as the daemon reads it
 * (daemon/auth/authenticator.ts): an Authorization that is not a Bearer token, or one that fails
 * the key format and checksum (the daemon's own parseApiKey), is a 401 `invalid_key`; no
 * Authorization on a route that needs a credential, and no session where the route takes one, a
 * 401 `unauthorized`. The daemon still judges the request (and counts a refused key as a failed
 * attempt, spec 8); this only spares the client the upload of a body nobody will read.
 */
function refusedByCredential(request: FastifyRequest): boolean {
  const credential = credentialNeeded(request);
  if (credential === undefined || credential === "none") return false;
  const authorization = request.headers.authorization ?? "";
  if (authorization.trim() === "") {
    return credential === "key" || sessionOf(request) === undefined;
  }
  const bearer = bearerOf(authorization);
  return bearer === undefined || parseApiKey(bearer) === null;
}

/**
 * The answer to a request that would be judged by its dashboard session (a banner endpoint, no
 * Authorization) and carries the session cookie with two different values (docs/behaviour.md).
 * Neither is taken: the first a browser sends is the one of the longest Path, which a sibling
 * subdomain may set for the parent domain with its own team's session, so that the dashboard's
 * own writes (its Origin passing the CSRF rule, decisions §2) would land in that team. The 401 is
 * the one of a session that cannot be used (spec 7); nothing is judged, so it is no failed attempt.
 */
function ambiguousSession(request: FastifyRequest): HttpError | undefined {
  if (credentialNeeded(request) !== "key or session") return undefined;
  if ((request.headers.authorization ?? "").trim() !== "") return undefined;
  const count = sessionCookiesOf(request).length;
  if (count < 2) return undefined;
  return {
    status: 401,
    code: "unauthorized",
    message: `The request carries ${count} different consent_session cookies, so its dashboard session is unknown; one may have been set for a parent domain by another site: remove them and set the session again`,
    headers: {},
  };
}

/**
 * spec 9.4: every response of the versioned wrapper names the version that handled it. A team's
 * data, for one credential, is never kept by a cache between the client and the gateway (HTTP
 * caches leave answers to Authorization alone, not those to a session cookie).
 */
function versioned(reply: FastifyReply): void {
  setVersionHeaders(reply);
  reply.header("cache-control", "no-store");
}

/**
 * The versioned REST API under /api/v1 (spec 4, 9). Bodies are not parsed here: whatever the
 * content type, the bytes go to the daemon, which parses them as JSON with prototype-poisoning
 * protection and validates them after authentication (decisions §2).
 */
export async function v1Api(app: FastifyInstance, options: V1Options): Promise<void> {
  const { clients, relay, onBannerWritten } = options;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
  const unknownPath = (request: FastifyRequest, reply: FastifyReply) =>
    sendEnvelopedError(reply, noEndpoint(request));
  // On every answer, however it came (a route, a refusal, an error), and in this one place.
  app.addHook("onSend", (_request, reply, payload, done) => {
    versioned(reply);
    done(null, payload);
  });
  app.addHook("onRequest", async (request, reply) => {
    // decisions §6: an unknown path is a 404, answered before its body is read or judged.
    if (request.is404) return unknownPath(request, reply);
    const ambiguous = ambiguousSession(request);
    if (ambiguous) return sendEnvelopedError(reply, ambiguous);
    // decisions §2: the credential is judged before the body; one refused by its form alone, or
    // none where one is needed, is answered without asking for the body (`Expect: 100-continue`).
    // Judged only for a request that awaits the go-ahead: no other has a body to spare.
    forgoBodyIfAwaited(request, refusedByCredential);
    // The content type plays no part here, so it is dropped before Fastify judges it: a malformed
    // one (`json`, two merged headers) would be a 415, which spec 7 does not have, answered ahead
    // of the credential checks (decisions §2).
    delete request.headers["content-type"];
  });
  // Also for a request refused before this plugin's hooks ran (gateway/request-rules.ts).
  app.setErrorHandler((error, request, reply) =>
    sendEnvelopedError(reply, failureOf(request, error)),
  );
  // decisions §6: an unknown path under /api/v1/ is a 404 with the envelope.
  app.setNotFoundHandler(unknownPath);
  healthRoutes(app, clients);
  bannerRoutes(app, clients, relay, onBannerWritten);
  subjectRoutes(app, clients, relay);
  webhookRoutes(app, clients, relay);
}
