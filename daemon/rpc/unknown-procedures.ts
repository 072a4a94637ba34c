import { Code, ConnectError } from "@connectrpc/connect";
import { clipped } from "#daemon/errors.js";
import type { RefuseCall } from "#daemon/rpc/call-refusal.js";
import type { DaemonApp } from "#daemon/rpc/connect-unary-route.js";

/** A procedure path: `/package.Service/Method`. */
const PROCEDURE = /^\/([^/]+)\/([^/]+)$/;

/**
 * The URL Fastify routes a request by. A path that does not decode (a broken escape such as
 * `%zz`, or escapes of no UTF-8 such as `%ED%A0%80`) has each `%` escaped, so that it names
 * itself and reaches no route, as any unknown path: Fastify's router would refuse it itself,
 * with HTTP 400 and its own JSON (`FST_ERR_BAD_URL`), which gRPC clients read as INTERNAL, a
 * failure to retry. No procedure's name holds a `%`, and the answer names the path as sent
 * (request.originalUrl).
 */
export function routableUrl(url: string): string {
  const queryAt = url.indexOf("?");
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  if (!path.includes("%")) return url;
  try {
    decodeURIComponent(path);
    return url;
  } catch {
    // Does not decode: routed as the literal text it is.
    return path.replaceAll("%", "%25") + (queryAt === -1 ? "" : url.slice(queryAt));
  }
}

/**
 * Why a path names no procedure the daemon serves, in gRPC's words for it (grpc-go's server):
 * an unknown service, an unknown method of a service it serves, or no procedure's form at all.
 * Paths come from the caller, so the text is clipped as every error text is (errors.ts).
 */
function unknownProcedure(path: string, serves: (service: string) => boolean): ConnectError {
  const [, service, method] = PROCEDURE.exec(path) ?? [];
  const message =
    service === undefined
      ? `malformed method name: ${JSON.stringify(path)}`
      : serves(service)
        ? `unknown method ${method} for service ${service}`
        : `unknown service ${service}`;
  return new ConnectError(clipped(message), Code.Unimplemented);
}

/**
 * decisions §7: a call to a procedure the daemon does not serve is answered UNIMPLEMENTED in the
 * caller's protocol, as connect-es answers a method a service leaves out: gRPC with HTTP 200,
 * `grpc-status: 12` and its `grpc-message`; gRPC-Web likewise in its trailers; Connect unary with
 * HTTP 501 (the Connect protocol's status for unimplemented) and the error's JSON; a Connect
 * stream with its end-of-stream message. Fastify's own 404 (its route-not-found JSON) is no answer
 * a gRPC client reads. The request is left unread (call-refusal.ts). Any other request to a path
 * no route serves (a GET, a content type of no RPC protocol) keeps Fastify's 404.
 */
export function answerUnknownProcedures(
  app: DaemonApp,
  serves: (service: string) => boolean,
  refuse: RefuseCall,
): void {
  app.addHook("onRequest", (request, reply, done) => {
    // Run for every request on the port: a served route passes on the route's own flag alone.
    if (request.is404 && request.method === "POST") {
      // The path as the caller sent it: a URL resolves dot segments (`/%2e%2e/…`), and
      // routableUrl may have escaped it, and either would name another path than the one called.
      const path = request.originalUrl.split("?")[0] as string;
      refuse(request, reply, unknownProcedure(path, serves));
    }
    done();
  });
}
