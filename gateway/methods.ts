import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { answeredAs, type HttpError } from "#gateway/errors.js";

/** How a path's family answers a failure: the v1 envelope, the log route's shape, a page. */
export type SendFailure = (
  reply: FastifyReply,
  error: HttpError,
) => FastifyReply | Promise<FastifyReply>;

/**
 * Answers every method the gateway routes (gateway/app.ts adds every one Node parses) that a
 * path does not serve with 405 and an `Allow` header (spec 7, decisions §3), in the path's own
 * failure shape, instead of Fastify's default 404. `methods` lists the path's own; HEAD is added
 * for GET, since Fastify answers it.
 */
export function refuseOtherMethods(
  app: FastifyInstance,
  url: string,
  methods: readonly string[],
  send: SendFailure,
): void {
  const allowed = methods.includes("GET") ? [...methods, "HEAD"] : [...methods];
  const others = app.supportedMethods.filter((method) => !allowed.includes(method));
  const allow = allowed.join(", ");
  const refuse = (request: FastifyRequest, reply: FastifyReply) =>
    send(reply.header("Allow", allow), {
      status: 405,
      code: "method_not_allowed",
      message: `Method ${answeredAs(request)} is not allowed on this endpoint; allowed: ${allow}`,
      headers: {},
    });
  app.route({
    method: others,
    url,
    // Answered before the body is read: a body the method cannot take is neither waited for nor
    // judged (a malformed Content-Type, a QUERY without one).
    onRequest: async (request, reply) => {
      await refuse(request, reply);
      return reply;
    },
    handler: refuse,
  });
}
