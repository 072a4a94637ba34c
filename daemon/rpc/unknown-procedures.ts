import { constants } from "node:http2";
import { create, createFileRegistry, type DescMethodBiDiStreaming } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, file_google_protobuf_empty } from "@bufbuild/protobuf/wkt";
import {
  Code,
  ConnectError,
  createConnectRouter,
  createContextKey,
  createContextValues,
} from "@connectrpc/connect";
import { contentTypeUnaryRegExp } from "@connectrpc/connect/protocol-connect";
import {
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import { clipped } from "#daemon/errors.js";
import { answerConnectError, type DaemonApp } from "#daemon/rpc/connect-unary-route.js";

/** A procedure path: `/package.Service/Method`. */
const PROCEDURE = /^\/([^/]+)\/([^/]+)$/;

/** The path of a call to an unknown procedure as its caller sent it, for the stand-in's answer. */
const kPathAsSent = createContextKey("", { description: "the path of the call, as sent" });

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
 * A stand-in procedure that streams both ways: connect-es runs its implementation before it reads
 * any request message, so its answer does not depend on what the request carries, however
 * malformed, compressed or long.
 */
function standInMethod(): DescMethodBiDiStreaming {
  const registry = createFileRegistry(
    create(FileDescriptorProtoSchema, {
      name: "consent/internal/unknown_procedure.proto",
      package: "consent.internal",
      dependency: ["google/protobuf/empty.proto"],
      syntax: "proto3",
      service: [
        {
          name: "UnknownProcedure",
          method: [
            {
              name: "Any",
              inputType: ".google.protobuf.Empty",
              outputType: ".google.protobuf.Empty",
              clientStreaming: true,
              serverStreaming: true,
            },
          ],
        },
      ],
    }),
    () => file_google_protobuf_empty,
  );
  const service = registry.getService("consent.internal.UnknownProcedure");
  return service?.methods[0] as DescMethodBiDiStreaming;
}

/**
 * decisions §7: a call to a procedure the daemon does not serve is answered UNIMPLEMENTED in the
 * caller's protocol, as connect-es answers a method a service leaves out: gRPC with HTTP 200,
 * `grpc-status: 12` and its `grpc-message`; gRPC-Web likewise in its trailers; Connect unary with
 * HTTP 501 (the Connect protocol's status for unimplemented) and the error's JSON; a Connect
 * stream with its end-of-stream message. Fastify's own 404 (its route-not-found JSON) is no answer
 * a gRPC client reads. gRPC, gRPC-Web and Connect streams are answered by connect-es' handler of
 * a stand-in procedure that fails at once; a Connect unary call, whose connect-es handler reads
 * and parses the request before it fails, with the protocol's own helpers, as
 * connect-unary-route.ts answers its errors. The request is left unread: once the answer is out
 * the stream is reset (daemon/server.ts, resetOnceAnswered). Any other request to a path no route
 * serves (a GET, a content type of no RPC protocol) keeps Fastify's 404.
 */
export function answerUnknownProcedures(
  app: DaemonApp,
  serves: (service: string) => boolean,
): void {
  const router = createConnectRouter();
  router.rpc(standInMethod(), (_requests, context) => {
    throw unknownProcedure(context.values.get(kPathAsSent), serves);
  });
  const [handler] = router.handlers;
  if (!handler) throw new Error("connect-es registered no handler for the stand-in procedure");
  app.addHook("onRequest", (request, reply, done) => {
    // Run for every request on the port: a served route passes on the route's own flag alone.
    if (!request.is404 || request.method !== "POST") {
      done();
      return;
    }
    const type = request.headers["content-type"] ?? "";
    const unary = contentTypeUnaryRegExp.test(type);
    if (!unary && !handler.supportedContentType(type)) {
      done();
      return;
    }
    reply.hijack();
    done();
    const response = reply.raw;
    // The path as the caller sent it: a URL resolves dot segments (`/%2e%2e/…`), and routableUrl
    // may have escaped it, and either would name another path than the one called.
    const path = request.originalUrl.split("?")[0] as string;
    if (unary) {
      answerConnectError(response, unknownProcedure(path, serves));
      return;
    }
    const values = createContextValues().set(kPathAsSent, path);
    handler(universalRequestFromNodeRequest(request.raw, response, undefined, values))
      .then((answer) => universalResponseToNodeResponse(answer, response))
      .catch((error: unknown) => {
        request.log.error({ err: error }, "a call to an unknown procedure could not be answered");
        if (!response.stream.destroyed) response.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      });
  });
}
