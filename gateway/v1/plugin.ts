import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendEnvelopedError, setVersionHeaders } from "#gateway/envelope.js";
import { failureOf, noEndpoint } from "#gateway/errors.js";
import type { Relay } from "#gateway/relay.js";
import { bannerRoutes } from "#gateway/v1/banners/routes.js";
import { healthRoutes } from "#gateway/v1/health/routes.js";
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
  app.addHook("onRequest", async (request, reply) => {
    // spec 9.4: every response of the versioned wrapper names the version that handled it.
    setVersionHeaders(reply);
    // A team's data, for one credential: never kept by a cache between the client and the
    // gateway (HTTP caches leave answers to Authorization alone, not those to a session cookie).
    reply.header("cache-control", "no-store");
    // decisions §6: an unknown path is a 404, answered before its body is read or judged.
    if (request.is404) return unknownPath(request, reply);
    const twice = headerGivenTwice(request.raw.rawHeaders);
    if (twice !== undefined) {
      return sendEnvelopedError(reply, {
        status: 400,
        code: "invalid_request",
        message: `The request carries more than one ${twice} header`,
        headers: {},
      });
    }
    // The content type plays no part here, so it is dropped before Fastify judges it: a malformed
    // one (`json`, two merged headers) would be a 415, which spec 7 does not have, answered ahead
    // of the credential checks (decisions §2).
    delete request.headers["content-type"];
  });
  app.setErrorHandler((error, request, reply) => {
    const httpError = failureOf(request, error);
    return sendEnvelopedError(reply, httpError);
  });
  // decisions §6: an unknown path under /api/v1/ is a 404 with the envelope.
  app.setNotFoundHandler(unknownPath);
  healthRoutes(app, clients);
  bannerRoutes(app, clients, relay, onBannerWritten);
  subjectRoutes(app, clients, relay);
  webhookRoutes(app, clients, relay);
}
