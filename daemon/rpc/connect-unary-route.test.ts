import type http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createClient,
  createContextValues,
  type HandlerContext,
} from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import {
  compressionGzip,
  createConnectTransport,
  createGrpcTransport,
} from "@connectrpc/connect-node";
import { fastify } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serveConnectUnary } from "#daemon/rpc/connect-unary-route.js";
import { createServiceTable } from "#daemon/rpc/in-process-transport.js";
import { answeringParseFailuresAsInvalid } from "#daemon/rpc/parse-failures.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus as Status,
} from "#gen/grpc/health/v1/health_pb.js";
import { grpcFrame, grpcWebTrailers, rawRequest } from "#test/support/raw-http2.js";
import { failureFrom } from "#test/support/stand-in-daemon.js";

const READ_MAX_BYTES = 4096;
const CHECK_PATH = "/grpc.health.v1.Health/Check";

/** What the test service's handlers saw, by the `service` field of the request. */
const seen = new Map<string, { signalReason?: unknown; header?: string | null; peer?: unknown }>();
const kPeer = { id: Symbol("peer"), defaultValue: "" };

/** grpc.health.v1.Health/Check, its `service` field choosing what the handler does. */
function routes(router: ConnectRouter) {
  router.service(Health, {
    async check(request, ctx: HandlerContext) {
      const record: { signalReason?: unknown; header?: string | null; peer?: unknown } = {
        header: ctx.requestHeader.get("x-caller"),
        peer: ctx.values.get(kPeer),
      };
      seen.set(request.service, record);
      switch (request.service) {
        case "headers":
          ctx.responseHeader.set("x-figure", "7");
          ctx.responseTrailer.set("x-after", "8");
          return { status: Status.SERVING };
        case "refused":
          throw new ConnectError("no such thing", Code.NotFound, { "x-figure": "9" }, [
            { desc: ErrorInfoSchema, value: { code: "not_found", message: "no such thing" } },
          ]);
        case "crash":
          throw new Error("secret internal detail");
        case "wait":
          await new Promise<void>((resolve) => {
            ctx.signal.addEventListener("abort", () => {
              record.signalReason = ctx.signal.reason;
              resolve();
            });
          });
          throw ConnectError.from(ctx.signal.reason);
        default:
          return { status: Status.SERVING };
      }
    },
  });
}

/** One request to the stand-in's Check over its own HTTP/2 connection. */
const rawCall = (url: string, headers: http2.OutgoingHttpHeaders, body: Uint8Array) =>
  rawRequest(url, CHECK_PATH, headers, body);

const plainHeaders = { "content-type": "application/proto", "connect-protocol-version": "1" };
/** The same request with a deadline: the short way leaves it to connect-es. */
const viaConnectEs = { ...plainHeaders, "connect-timeout-ms": "60000" };
const checkBody = (service: string) =>
  toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service }));

/**
 * A daemon stand-in: the short way and connect-es' plugin on one Fastify HTTP/2 port, as
 * listenDaemon composes them, counting the calls the short way answered.
 */
async function startDaemonStandIn() {
  const shutdown = new AbortController();
  const app = fastify({ http2: true, forceCloseConnections: true });
  const contextValues = () => createContextValues().set(kPeer, "peer-1");
  const table = createServiceTable({ routes });
  let shortWayCalls = 0;
  serveConnectUnary(app as never, {
    table: {
      ...table,
      invokeUnary: (method, ctx, message) => {
        shortWayCalls++;
        return table.invokeUnary(method, ctx, message);
      },
    },
    readMaxBytes: READ_MAX_BYTES,
    contextValues,
    shutdownSignal: shutdown.signal,
  });
  await app.register(fastifyConnectPlugin, {
    routes: answeringParseFailuresAsInvalid(routes),
    readMaxBytes: READ_MAX_BYTES,
    shutdownSignal: shutdown.signal,
    contextValues,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`,
    shutdown,
    shortWayCalls: () => shortWayCalls,
    close: () => app.close(),
  };
}

describe("the daemon's short way for binary Connect unary calls", () => {
  let daemon: Awaited<ReturnType<typeof startDaemonStandIn>>;
  let url: string;

  beforeAll(async () => {
    daemon = await startDaemonStandIn();
    url = daemon.url;
  });
  afterAll(async () => {
    await daemon.close();
  });

  it("answers a call as connect-es does: status, body, headers and trailers", async () => {
    const before = daemon.shortWayCalls();
    const short = await rawCall(url, { ...plainHeaders, "x-caller": "a" }, checkBody("headers"));
    expect(daemon.shortWayCalls()).toBe(before + 1);
    expect(seen.get("headers")).toEqual({ header: "a", peer: "peer-1" });
    const long = await rawCall(url, { ...viaConnectEs, "x-caller": "a" }, checkBody("headers"));
    expect(daemon.shortWayCalls()).toBe(before + 1);
    expect(short.status).toBe(200);
    expect(short.headers["content-type"]).toBe("application/proto");
    expect(short.body.equals(long.body)).toBe(true);
    for (const name of ["x-figure", "trailer-x-after", "content-type", "content-length"]) {
      expect(short.headers[name], name).toBe(long.headers[name]);
    }
  });

  it("answers a refusal with the same status, error JSON, details and metadata", async () => {
    const short = await rawCall(url, plainHeaders, checkBody("refused"));
    const long = await rawCall(url, viaConnectEs, checkBody("refused"));
    expect(short.status).toBe(404);
    expect(short.headers["content-type"]).toBe("application/json");
    expect(short.headers["x-figure"]).toBe("9");
    expect(JSON.parse(short.body.toString())).toEqual(JSON.parse(long.body.toString()));
    expect(JSON.parse(short.body.toString())).toMatchObject({
      code: "not_found",
      message: "no such thing",
      details: [{ type: "consent.v1.ErrorInfo" }],
    });
  });

  it("answers an unexpected failure as a bare internal error, as connect-es does", async () => {
    const short = await rawCall(url, plainHeaders, checkBody("crash"));
    const long = await rawCall(url, viaConnectEs, checkBody("crash"));
    expect(short.status).toBe(500);
    expect(JSON.parse(short.body.toString())).toEqual(JSON.parse(long.body.toString()));
    expect(short.body.toString()).not.toContain("secret");
  });

  it("refuses a body it cannot parse with invalid_argument, on every path and in gRPC", async () => {
    // connect-es' own server answers internal (500, grpc-status 13) here; connect-go and gRPC
    // answer invalid_argument, the code the protocol gives a message that cannot be read.
    const unreadable = new Uint8Array([0x0a, 0xff]);
    const short = await rawCall(url, plainHeaders, unreadable);
    const long = await rawCall(url, viaConnectEs, unreadable);
    for (const reply of [short, long]) {
      expect(reply.status).toBe(400);
      expect(JSON.parse(reply.body.toString())).toMatchObject({
        code: "invalid_argument",
        message: expect.stringMatching(/^parse binary: /),
      });
      expect(reply.headers["content-length"]).toBe(String(reply.body.byteLength));
    }
    const grpcHeaders = { "content-type": "application/grpc", te: "trailers" };
    const grpc = await rawCall(url, grpcHeaders, grpcFrame(unreadable));
    expect([grpc.status, grpc.trailers["grpc-status"]]).toEqual([200, "3"]);
    expect(decodeURIComponent(String(grpc.trailers["grpc-message"]))).toMatch(/^parse binary: /);
    // gRPC-Web carries the status in the body's trailer frame.
    const grpcWeb = await rawCall(
      url,
      { "content-type": "application/grpc-web+proto" },
      grpcFrame(unreadable),
    );
    expect(grpcWeb.status).toBe(200);
    expect(grpcWebTrailers(grpcWeb.body)).toEqual({
      "grpc-status": "3",
      "grpc-message": expect.stringMatching(/^parse binary: /),
      // The ErrorInfo (invalid_request) of every invalid request (decisions §7).
      "grpc-status-details-bin": expect.any(String),
    });
    expect(
      failureFrom(findTrailerError(new Headers(grpcWebTrailers(grpcWeb.body)))).errorCode,
    ).toBe("invalid_request");
    // Only that failure: a handler's own fault stays internal, and a good call is unchanged.
    const crash = await rawCall(url, grpcHeaders, grpcFrame(checkBody("crash")));
    expect(crash.trailers["grpc-status"]).toBe("13");
    const fine = await rawCall(url, grpcHeaders, grpcFrame(checkBody("plain")));
    expect(fine.trailers["grpc-status"]).toBe("0");
    const webCrash = await rawCall(
      url,
      { "content-type": "application/grpc-web+proto" },
      grpcFrame(checkBody("crash")),
    );
    expect(grpcWebTrailers(webCrash.body)["grpc-status"]).toBe("13");
  });

  it("refuses a body over readMaxBytes with resource_exhausted, declared or not", async () => {
    const large = checkBody("x".repeat(READ_MAX_BYTES + 10));
    const declared = await rawCall(
      url,
      { ...plainHeaders, "content-length": String(large.byteLength) },
      large,
    );
    const streamed = await rawCall(url, plainHeaders, large);
    const long = await rawCall(url, viaConnectEs, large);
    for (const reply of [declared, streamed, long]) {
      expect(reply.status).toBe(429);
      expect(JSON.parse(reply.body.toString())).toMatchObject({ code: "resource_exhausted" });
    }
  });

  it("leaves gRPC, Connect JSON and compressed calls to connect-es, which answers them", async () => {
    const before = daemon.shortWayCalls();
    for (const transport of [
      createGrpcTransport({ baseUrl: url }),
      createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: false }),
      createConnectTransport({
        baseUrl: url,
        httpVersion: "2",
        useBinaryFormat: true,
        sendCompression: compressionGzip,
        compressMinBytes: 0,
      }),
    ]) {
      const response = await createClient(Health, transport).check({ service: "plain" });
      expect(response.status).toBe(Status.SERVING);
    }
    expect(daemon.shortWayCalls()).toBe(before);
  });

  it("aborts a call's signal when its client cancels it", async () => {
    seen.delete("wait");
    const controller = new AbortController();
    const call = createClient(Health, createDaemonTransport({ baseUrl: url }))
      .check({ service: "wait" }, { signal: controller.signal })
      .catch((error: unknown) => error);
    await expect.poll(() => seen.has("wait")).toBe(true);
    controller.abort();
    expect(ConnectError.from(await call).code).toBe(Code.Canceled);
    await expect.poll(() => seen.get("wait")?.signalReason).toBeDefined();
    expect(ConnectError.from(seen.get("wait")?.signalReason).code).toBe(Code.Canceled);
  });

  it("aborts the signal of every call in flight when the shutdown signal fires", async () => {
    const closing = await startDaemonStandIn();
    try {
      seen.delete("wait");
      const call = createClient(Health, createDaemonTransport({ baseUrl: closing.url }))
        .check({ service: "wait" })
        .catch((error: unknown) => error);
      await expect.poll(() => seen.has("wait")).toBe(true);
      closing.shutdown.abort(new ConnectError("the daemon is shutting down", Code.Unavailable));
      const failure = ConnectError.from(await call);
      expect(failure.code).toBe(Code.Unavailable);
      expect(failure.rawMessage).toBe("the daemon is shutting down");
      expect(closing.shortWayCalls()).toBe(1);
    } finally {
      await closing.close();
    }
  });
});
