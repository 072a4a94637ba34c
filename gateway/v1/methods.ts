import type { FastifyInstance, RouteHandlerMethod } from "fastify";
import { sendEnvelopedError } from "#gateway/envelope.js";

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
const EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/**
 * Registers a path's handlers and answers every other method with 405 and an `Allow` header
 * (decisions §3), instead of Fastify's default 404.
 */
export function routePath(
  app: FastifyInstance,
  url: string,
  handlers: Partial<Record<Method, RouteHandlerMethod>>,
): void {
  // Fastify answers HEAD for every GET route.
  const allowed = [...Object.keys(handlers), ...(handlers.GET ? ["HEAD"] : [])];
  for (const [method, handler] of Object.entries(handlers)) app.route({ method, url, handler });
  const others = EVERY_METHOD.filter((method) => !allowed.includes(method));
  app.route({
    method: others,
    url,
    handler: (request, reply) => {
      reply.header("Allow", allowed.join(", "));
      return sendEnvelopedError(reply, {
        status: 405,
        code: "method_not_allowed",
        message: `Method ${request.method} is not allowed on this endpoint; allowed: ${allowed.join(", ")}`,
        headers: {},
      });
    },
  });
}
