import type { FastifyInstance, FastifyRequest, RouteHandlerMethod } from "fastify";
import { sendEnvelopedError } from "#gateway/envelope.js";
import { refuseOtherMethods } from "#gateway/methods.js";

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/**
 * The credential a path's handlers need (spec 5, decisions §2): none (health), an API key, or an
 * API key or a dashboard session (the banner endpoints).
 */
export type Credential = "none" | "key" | "key or session";

declare module "fastify" {
  interface FastifyContextConfig {
    /** Set on the versioned API's routes (routePath); unset on its 405 refusals. */
    credential?: Credential;
  }
}

/** The credential the route a request reached needs, if it is one of routePath's handlers. */
export function credentialNeeded(request: FastifyRequest): Credential | undefined {
  return request.routeOptions.config.credential;
}

/**
 * Registers a path's handlers, which need `credential`, and answers every other method with 405
 * and an `Allow` header in the envelope (decisions §3), instead of Fastify's default 404.
 */
export function routePath(
  app: FastifyInstance,
  url: string,
  credential: Credential,
  handlers: Partial<Record<Method, RouteHandlerMethod>>,
): void {
  for (const [method, handler] of Object.entries(handlers)) {
    app.route({ method, url, handler, config: { credential } });
  }
  refuseOtherMethods(app, url, Object.keys(handlers), sendEnvelopedError);
}
