import type { IncomingHttpHeaders } from "node:http";
import http2, {
  type Http2Server,
  type Http2ServerRequest,
  type Http2ServerResponse,
} from "node:http2";
import { type DescMethodUnary, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import {
  codeToHttpStatus,
  errorToJsonBytes,
  trailerMux,
} from "@connectrpc/connect/protocol-connect";
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteGenericInterface } from "fastify";
import type { Logger } from "pino";
import { kAnswerSent } from "#daemon/auth/caller.js";
import { messageOf } from "#daemon/errors.js";
import { type CallContext, PlainCallContext } from "#daemon/rpc/call-context.js";
import { CALL_FINISHED, type ServiceTable } from "#daemon/rpc/in-process-transport.js";
import { oversizedRequest, PARSE_FAILURE, unreadableRequest } from "#daemon/rpc/parse-failures.js";

export interface ConnectUnaryRouteOptions {
  /** The daemon's services (createServiceTable over Daemon.routes and Daemon.interceptors). */
  table: ServiceTable;
  /** The largest request body read, as connect-es' readMaxBytes. */
  readMaxBytes: number;
  /** The context values of a call, as given to the connect-es plugin. */
  contextValues: (request: { ip: string }) => ContextValues;
  /** Aborted when the daemon stops waiting for calls: the context signal of every call follows. */
  shutdownSignal: AbortSignal;
}

/**
 * The daemon port's short way for the calls the stand-alone gateway makes on every REST request:
 * Connect-protocol unary calls with a binary body (`POST /package.Service/Method`,
 * `Content-Type: application/proto`, `Connect-Protocol-Version: 1`, neither compression nor a
 * deadline). connect-es' server answers them through its general machinery (universal request and
 * response objects, async iterables, a linked AbortController aborted with a DOMException at the
 * end of every call): about 270 µs of CPU per call on this hardware, where Fastify's own HTTP/2
 * route costs about 60 (bench/README.md). This answers them with the same implementations behind
 * the same interceptors (ServiceTable), and the protocol's own helpers for the error body and
 * trailers, so the answer on the wire is the one connect-es gives. Every other request (gRPC,
 * gRPC-Web, Connect JSON, GET, compressed, with a deadline, streaming) reaches connect-es' plugin
 * as before.
 */
/** The daemon's Fastify instance: HTTP/2 without TLS. */
export type DaemonApp = FastifyInstance<
  Http2Server,
  Http2ServerRequest,
  Http2ServerResponse,
  Logger
>;
/** A request to the daemon's port, as its hooks see it. */
export type DaemonRequest = FastifyRequest<RouteGenericInterface, Http2Server, Http2ServerRequest>;
/** An answer on the daemon's port, as its hooks see it. */
export type DaemonReply = FastifyReply<
  RouteGenericInterface,
  Http2Server,
  Http2ServerRequest,
  Http2ServerResponse
>;

export function serveConnectUnary(app: DaemonApp, options: ConnectUnaryRouteOptions): void {
  const inFlight = new Set<CallContext>();
  options.shutdownSignal.addEventListener(
    "abort",
    () => {
      for (const ctx of inFlight) ctx.abort(options.shutdownSignal.reason);
    },
    { once: true },
  );

  async function serve(
    method: DescMethodUnary,
    request: DaemonRequest,
    response: Http2ServerResponse,
  ): Promise<void> {
    const ctx = new PlainCallContext({
      service: method.parent,
      method,
      protocolName: "connect",
      requestMethod: "POST",
      url: `http://${request.host}${request.url}`,
      requestHeader: headerRecord(request.headers),
      contextValues: options.contextValues(request),
    });
    inFlight.add(ctx);
    if (options.shutdownSignal.aborted) ctx.abort(options.shutdownSignal.reason);
    // Written means handed to the connection as its flow control lets it go (or the stream gone).
    const sent = new Promise<void>((resolve) => {
      response.once("finish", resolve);
      response.once("close", resolve);
    });
    ctx.values.set(kAnswerSent, () => sent);
    // Removed before the answer is written: a close before then is the client going away.
    const onClose = () =>
      ctx.abort(new ConnectError("the client canceled the call", Code.Canceled));
    response.once("close", onClose);
    let status = 200;
    let contentType = "application/proto";
    let header = ctx.responseHeader;
    let trailer: Headers | undefined;
    let body: Uint8Array;
    try {
      const bytes = await readBody(request, options.readMaxBytes);
      let input: ReturnType<typeof fromBinary>;
      try {
        input = fromBinary(method.input, bytes);
      } catch (error) {
        throw unreadableRequest(`${PARSE_FAILURE}${messageOf(error)}`);
      }
      const output = await options.table.invokeUnary(method, ctx, input);
      header = output.header;
      trailer = output.trailer;
      body = toBinary(method.output, output.message);
    } catch (thrown) {
      const error =
        thrown instanceof ConnectError
          ? thrown
          : new ConnectError("internal error", Code.Internal, undefined, undefined, thrown);
      status = codeToHttpStatus(error.code);
      contentType = "application/json";
      error.metadata.forEach((value, name) => {
        header.set(name, value);
      });
      trailer = ctx.responseTrailer;
      body = errorToJsonBytes(error, undefined);
    } finally {
      inFlight.delete(ctx);
      ctx.abort(CALL_FINISHED);
    }
    response.off("close", onClose);
    if (response.stream.destroyed || response.writableEnded) return;
    const out: Record<string, string> = {};
    (trailer ? trailerMux(header, trailer) : header).forEach((value, name) => {
      out[name] = value;
    });
    out["content-type"] = contentType;
    out["content-length"] = String(body.byteLength);
    response.writeHead(status, out);
    response.end(body);
  }

  app.addHook("onRequest", (request, reply, done) => {
    const method = request.method === "POST" ? options.table.unaryAt(request.url) : undefined;
    if (method === undefined || !isPlainConnectUnary(request.headers)) {
      done();
      return;
    }
    reply.hijack();
    done();
    serve(method, request, reply.raw).catch((error: unknown) => {
      request.log.error({ err: error }, "a Connect call could not be answered");
      answerInternalError(reply.raw);
    });
  });
}

/** The last resort when writing an answer failed: a bare internal error, or a reset stream. */
function answerInternalError(response: Http2ServerResponse): void {
  if (response.stream.destroyed || response.writableEnded) return;
  if (response.headersSent) {
    response.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  answerConnectError(response, new ConnectError("internal error", Code.Internal));
}

/** A Connect unary error as the protocol answers it: its HTTP status, and its JSON alone. */
export function answerConnectError(response: Http2ServerResponse, error: ConnectError): void {
  const body = errorToJsonBytes(error, undefined);
  response.writeHead(codeToHttpStatus(error.code), {
    "content-type": "application/json",
    "content-length": String(body.byteLength),
  });
  response.end(body);
}

/** A binary Connect unary call with nothing the short way does not handle. */
function isPlainConnectUnary(headers: IncomingHttpHeaders): boolean {
  const encoding = headers["content-encoding"];
  return (
    headers["content-type"] === "application/proto" &&
    headers["connect-protocol-version"] === "1" &&
    headers["connect-timeout-ms"] === undefined &&
    (encoding === undefined || encoding === "identity")
  );
}

/** The request headers as a handler reads them, without HTTP/2 pseudo-headers. */
function headerRecord(headers: IncomingHttpHeaders): Record<string, string> {
  const record: Record<string, string> = {};
  for (const name in headers) {
    if (name.charCodeAt(0) === 58 /* ":" */) continue;
    const value = headers[name];
    if (value === undefined) continue;
    record[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return record;
}

/** The whole request body, refused past readMaxBytes as connect-es refuses it. */
function readBody(request: DaemonRequest, readMaxBytes: number): Promise<Uint8Array> {
  const tooLarge = () =>
    oversizedRequest(`message size is larger than configured readMaxBytes ${readMaxBytes}`);
  const declared = Number(request.headers["content-length"]);
  if (declared > readMaxBytes) return Promise.reject(tooLarge());
  const raw = request.raw;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const cleanup = () => {
      raw.off("data", onData);
      raw.off("end", onEnd);
      raw.off("error", onError);
      raw.off("aborted", onAborted);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.byteLength;
      if (received > readMaxBytes) {
        cleanup();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(new ConnectError(`reading the request failed: ${error.message}`, Code.Aborted));
    };
    const onAborted = () => {
      cleanup();
      reject(new ConnectError("the client canceled the call", Code.Canceled));
    };
    raw.on("data", onData);
    raw.on("end", onEnd);
    raw.on("error", onError);
    raw.on("aborted", onAborted);
  });
}
