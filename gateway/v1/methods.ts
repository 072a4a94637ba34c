import type { FastifyInstance, RouteHandlerMethod } from "fastify";
import { sendEnvelopedError } from "#gateway/envelope.js";
import { refuseOtherMethods } from "#gateway/methods.js";

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/**
 * Registers a path's handlers and answers every other method with 405 and an `Allow` header in
 * the envelope (decisions §3), instead of Fastify's default 404.
 */
export function routePath(
  app: FastifyInstance,
  url: string,
  handlers: Partial<Record<Method, RouteHandlerMethod>>,
): void {
  for (const [method, handler] of Object.entries(handlers)) app.route({ method, url, handler });
  refuseOtherMethods(app, url, Object.keys(handlers), sendEnvelopedError);
}
