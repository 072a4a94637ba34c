import { constants } from "node:http2";
import { create, createFileRegistry, type DescMethodBiDiStreaming } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, file_google_protobuf_empty } from "@bufbuild/protobuf/wkt";
import {
  type ConnectError,
  createConnectRouter,
  createContextKey,
  createContextValues,
} from "@connectrpc/connect";
import { contentTypeUnaryRegExp } from "@connectrpc/connect/protocol-connect";
import {
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import {
  answerConnectError,
  type DaemonReply,
  type DaemonRequest,
} from "#daemon/rpc/connect-unary-route.js";

/** The error a refused call is answered with, for the stand-in procedure to throw. */
const kRefusal = createContextKey<ConnectError | undefined>(undefined, {
  description: "the error a refused call is answered with",
});

/**
 * A stand-in procedure that streams both ways: connect-es runs its implementation before it reads
 * any request message, so its answer does not depend on what the request carries, however
 * malformed, compressed or long.
 */
function standInMethod(): DescMethodBiDiStreaming {
  const registry = createFileRegistry(
    create(FileDescriptorProtoSchema, {
      name: "consent/internal/refused_call.proto",
      package: "consent.internal",
      dependency: ["google/protobuf/empty.proto"],
      syntax: "proto3",
      service: [
        {
          name: "RefusedCall",
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
  const service = registry.getService("consent.internal.RefusedCall");
  return service?.methods[0] as DescMethodBiDiStreaming;
}

/**
 * Answers a call with `error` from an onRequest hook, neither running it nor reading its request;
 * false, answering nothing, for a request that is no call (a content type of no RPC protocol).
 */
export type RefuseCall = (
  request: DaemonRequest,
  reply: DaemonReply,
  error: ConnectError,
) => boolean;

/**
 * A call refused before any route runs, answered in the caller's protocol as connect-es answers a
 * failed call: gRPC with HTTP 200, `grpc-status` and its `grpc-message`; gRPC-Web likewise in its
 * trailers; Connect unary with the code's HTTP status and the error's JSON; a Connect stream with
 * its end-of-stream message. gRPC, gRPC-Web and Connect streams are answered by connect-es'
 * handler of a stand-in procedure that fails at once; a Connect unary call, whose connect-es
 * handler reads and parses the request before it fails, with the protocol's own helpers, as
 * connect-unary-route.ts answers its errors. The request is left unread: once the answer is out
 * the stream is reset (daemon/server.ts, resetOnceAnswered). The hook calls `done()` after it.
 */
export function createCallRefusal(): RefuseCall {
  const router = createConnectRouter();
  router.rpc(standInMethod(), (_requests, context) => {
    throw context.values.get(kRefusal);
  });
  const [handler] = router.handlers;
  if (!handler) throw new Error("connect-es registered no handler for the stand-in procedure");
  return (request, reply, error) => {
    const type = request.headers["content-type"] ?? "";
    const unary = contentTypeUnaryRegExp.test(type);
    if (!unary && !handler.supportedContentType(type)) return false;
    reply.hijack();
    const response = reply.raw;
    if (unary) {
      answerConnectError(response, error);
      return true;
    }
    const values = createContextValues().set(kRefusal, error);
    handler(universalRequestFromNodeRequest(request.raw, response, undefined, values))
      .then((answer) => universalResponseToNodeResponse(answer, response))
      .catch((failure: unknown) => {
        request.log.error({ err: failure }, "a refused call could not be answered");
        if (!response.stream.destroyed) response.stream.close(constants.NGHTTP2_INTERNAL_ERROR);
      });
    return true;
  };
}
