import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unaryBytes } from "#test/support/grpc-js.js";
import { answeredEarly, grpcFrame, grpcWebTrailers, rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

const UNKNOWN_METHOD = "/consent.v1.BannerService/NoSuchMethod";
const UNKNOWN_SERVICE = "/no.such.Service/Method";
const UNKNOWN = [
  [UNKNOWN_METHOD, "unknown method NoSuchMethod for service consent.v1.BannerService"],
  [UNKNOWN_SERVICE, "unknown service no.such.Service"],
] as const;

/**
 * decisions §7: a call to a procedure the daemon does not serve is UNIMPLEMENTED in the caller's
 * protocol, saying what is unknown, never Fastify's route-not-found JSON.
 */
describe("a call to a procedure the daemon does not serve", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it.each(UNKNOWN)(
    "is UNIMPLEMENTED for grpc-js, naming what is unknown (%s)",
    async (path, message) => {
      const error = await unaryBytes(service.daemonUrl, path, Buffer.from([0x0a, 0x01, 0x61]));
      expect([error?.code, error?.details]).toEqual([grpc.status.UNIMPLEMENTED, message]);
    },
  );

  it.each(["application/grpc", "application/grpc+proto", "application/grpc+json"])(
    "is answered HTTP 200 with grpc-status 12 and its grpc-message over gRPC (%s)",
    async (type) => {
      const reply = await rawRequest(
        service.daemonUrl,
        UNKNOWN_METHOD,
        { "content-type": type, te: "trailers" },
        grpcFrame(Buffer.from("{}")),
      );
      // In the trailers, or in the headers of an answer that is trailers only.
      const ended = { ...reply.headers, ...reply.trailers };
      expect([
        reply.status,
        String(reply.headers["content-type"]).startsWith("application/grpc"),
        ended["grpc-status"],
        ended["grpc-message"],
      ]).toEqual([200, true, "12", UNKNOWN[0][1]]);
    },
  );

  it("is answered with grpc-status 12 and its grpc-message in gRPC-Web's trailers", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      UNKNOWN_SERVICE,
      { "content-type": "application/grpc-web+proto" },
      grpcFrame(Buffer.alloc(0)),
    );
    const trailers = grpcWebTrailers(reply.body);
    expect([reply.status, trailers["grpc-status"], trailers["grpc-message"]]).toEqual([
      200,
      "12",
      UNKNOWN[1][1],
    ]);
  });

  // The Connect protocol's status of unimplemented is 501, as connect-es answers a method a
  // service leaves out (its codeToHttpStatus).
  it.each([
    ["application/json", Buffer.from('{"name":"x"}')],
    ["application/proto", Buffer.from([0x0a, 0x01, 0x61])],
  ])("is a Connect unimplemented error for a unary call (%s)", async (type, body) => {
    for (const [path, message] of UNKNOWN) {
      const reply = await rawRequest(
        service.daemonUrl,
        path,
        { "content-type": type, "connect-protocol-version": "1" },
        body,
      );
      expect([
        reply.status,
        reply.headers["content-type"],
        JSON.parse(reply.body.toString()),
      ]).toEqual([501, "application/json", { code: "unimplemented", message }]);
    }
  });

  it("ends a Connect stream with an unimplemented end-of-stream message", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      UNKNOWN_METHOD,
      { "content-type": "application/connect+json", "connect-protocol-version": "1" },
      grpcFrame(Buffer.from("{}")),
    );
    // One end-stream frame (flags 0x02) holding the error.
    expect([reply.status, reply.body[0]]).toEqual([200, 0x02]);
    expect(JSON.parse(reply.body.subarray(5).toString())).toEqual({
      error: { code: "unimplemented", message: UNKNOWN[0][1] },
    });
  });

  it("answers before a request past the daemon's read limit has arrived, then resets it", async () => {
    const big = Buffer.alloc(3_000_000);
    const [grpcCall, connect] = await Promise.all([
      answeredEarly(
        service.daemonUrl,
        { ":path": UNKNOWN_METHOD, "content-type": "application/grpc", te: "trailers" },
        big,
      ),
      answeredEarly(
        service.daemonUrl,
        { ":path": UNKNOWN_SERVICE, "content-type": "application/proto" },
        big,
      ),
    ]);
    expect([
      grpcCall.trailers["grpc-status"],
      connect.response[":status"],
      grpcCall.rstCode,
      connect.rstCode,
    ]).toEqual(["12", 501, http2.constants.NGHTTP2_NO_ERROR, http2.constants.NGHTTP2_NO_ERROR]);
    // The answers whole, saying what is unknown, though the requests never all arrived.
    expect([grpcCall.trailers["grpc-message"], JSON.parse(connect.body.toString())]).toEqual([
      UNKNOWN[0][1],
      { code: "unimplemented", message: UNKNOWN[1][1] },
    ]);
  });

  // Regression: a path with a broken percent-escape reached Fastify's router, which answered its
  // own HTTP 400 JSON (FST_ERR_BAD_URL), read by gRPC clients as INTERNAL, a retry; and a path
  // with dot segments was named once resolved, as a served procedure called unknown.
  it.each([
    ["/consent.v1.BannerService/%zz", "unknown method %zz for service consent.v1.BannerService"],
    [
      "/consent.v1.BannerService/%ED%A0%80",
      "unknown method %ED%A0%80 for service consent.v1.BannerService",
    ],
    [
      "/%2e%2e/consent.v1.BannerService/ListBanners",
      'malformed method name: "/%2e%2e/consent.v1.BannerService/ListBanners"',
    ],
  ])(
    "is UNIMPLEMENTED naming the path as sent, however it is escaped (%s)",
    async (path, message) => {
      const error = await unaryBytes(service.daemonUrl, path, Buffer.alloc(0));
      expect([error?.code, error?.details]).toEqual([grpc.status.UNIMPLEMENTED, message]);
      const reply = await rawRequest(
        service.daemonUrl,
        path,
        { "content-type": "application/json", "connect-protocol-version": "1" },
        Buffer.from("{}"),
      );
      expect([reply.status, JSON.parse(reply.body.toString())]).toEqual([
        501,
        { code: "unimplemented", message },
      ]);
    },
  );

  it("leaves a request of no RPC protocol to the plain 404", async () => {
    const post = await rawRequest(
      service.daemonUrl,
      UNKNOWN_METHOD,
      { "content-type": "text/plain" },
      Buffer.from("x"),
    );
    expect(post.status).toBe(404);
    const session = http2.connect(service.daemonUrl);
    const get = session.request({ ":method": "GET", ":path": "/" });
    get.end();
    const [headers] = await Promise.all([
      new Promise<http2.IncomingHttpHeaders>((resolve) => get.once("response", resolve)),
      new Promise((resolve) => get.on("end", resolve).resume()),
    ]);
    session.close();
    expect(headers[":status"]).toBe(404);
  });
});

/**
 * The Connect protocol's answer to a content type it does not speak: HTTP 415, as connect-es
 * answers a call without one. Regression: Fastify read such a body first with its own parsers
 * (a form, XML, text) and answered its own JSON (`FST_ERR_CTP_INVALID_MEDIA_TYPE`), or, past 1
 * MiB of text, a 413 (`FST_ERR_CTP_BODY_TOO_LARGE`).
 */
describe("a request of no RPC protocol's content type to a procedure the daemon serves", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it.each([
    ["application/xml", 10],
    ["application/x-www-form-urlencoded", 10],
    ["multipart/form-data; boundary=x", 10],
    ["text/plain", 10],
    ["text/plain", 2 * 1024 * 1024],
  ])("is a bare 415, its body left unread (%s, %i bytes)", async (type, size) => {
    const reply = await rawRequest(
      service.daemonUrl,
      "/consent.v1.SubjectService/ResolveSubject",
      { "content-type": type },
      Buffer.alloc(size, 0x61),
    );
    expect([reply.status, reply.body.toString()]).toEqual([415, ""]);
  });
});
