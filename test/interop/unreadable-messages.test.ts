import { brotliCompressSync, gzipSync } from "node:zlib";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { errorFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { createTeam, mintKey } from "#test/support/api.js";
import { errorInfoOf, unaryBytes } from "#test/support/grpc-js.js";
import { grpcFrame, grpcWebTrailers, type RawReply, rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { failureFrom, failureOf } from "#test/support/stand-in-daemon.js";

const PUT = "/consent.v1.SubjectService/PutSubjectState";
const TAIL = "/consent.v1.ConsentLogService/TailConsentLogs";
/** Field 1 as length-delimited, its length byte past the end: no protobuf binary. */
const NOT_PROTOBUF = Buffer.from([0x0a, 0xff]);
const NOT_JSON = Buffer.from('{"bannerId":');
/** A message compressed with `compress`, its compressed bytes cut short of their end. */
const cutShort = (compress: (bytes: Buffer) => Buffer) =>
  compress(Buffer.from(JSON.stringify({ bannerId: "b".repeat(200) }))).subarray(0, 8);
/** A gRPC message frame flagged compressed. */
const compressedFrame = (message: Buffer) => {
  const frame = grpcFrame(message);
  frame[0] = 1;
  return frame;
};

/** The status of a gRPC answer: in its trailers, or in the headers of a trailers-only answer. */
const fromGrpc = (reply: RawReply) =>
  failureFrom(
    findTrailerError(
      new Headers(
        Object.entries({ ...reply.headers, ...reply.trailers })
          .filter(([name]) => !name.startsWith(":"))
          .map(([name, value]): [string, string] => [name, String(value)]),
      ),
    ),
  );
const fromGrpcWeb = (reply: RawReply) =>
  failureFrom(findTrailerError(new Headers(grpcWebTrailers(reply.body))));
/** What a body that is no error JSON reads as. */
const NO_ERROR = new ConnectError("", Code.Unknown);
const fromConnectUnary = (reply: RawReply) =>
  failureFrom(errorFromJsonBytes(reply.body, undefined, NO_ERROR));
/** A Connect stream's end-of-stream frame (its envelope's five bytes, then the JSON). */
const fromConnectStream = (reply: RawReply) =>
  failureFrom(
    errorFromJson(JSON.parse(reply.body.subarray(5).toString()).error, undefined, NO_ERROR),
  );

/**
 * decisions §7: every failure carries the ErrorInfo with its machine code, and a request message
 * the daemon cannot decode is the caller's invalid request, as a message that fails validation
 * is (spec 7's invalid_request), whichever protocol and serializer carried it.
 */
describe("a request message the daemon's port cannot decode", () => {
  let service: TestService;
  let key: string;
  beforeAll(async () => {
    service = await startTestService();
    ({ key } = await mintKey(service, await createTeam(service)));
  });
  afterAll(() => service.close());

  const invalidRequest = (message: RegExp | string) => ({
    code: Code.InvalidArgument,
    message: typeof message === "string" ? message : expect.stringMatching(message),
    errorCode: "invalid_request",
    retryAfter: null,
  });
  const parseBinary = invalidRequest(/^parse binary: /);

  it("carries the invalid_request ErrorInfo a message failing validation carries", async () => {
    const subjects = createClient(
      SubjectService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    expect(
      await failureOf(
        subjects.putSubjectState({}, { headers: { authorization: `Bearer ${key}` } }),
      ),
    ).toEqual(invalidRequest(/./));

    const error = await unaryBytes(service.daemonUrl, PUT, NOT_PROTOBUF);
    expect([error?.code, error && errorInfoOf(error).info?.code]).toEqual([
      grpc.status.INVALID_ARGUMENT,
      "invalid_request",
    ]);
  });

  it.each([
    ["gRPC, protobuf", "application/grpc", NOT_PROTOBUF, parseBinary],
    ["gRPC, JSON", "application/grpc+json", NOT_JSON, invalidRequest(/./)],
  ])("answers it so over %s", async (_, type, message, expected) => {
    const reply = await rawRequest(
      service.daemonUrl,
      PUT,
      { "content-type": type, te: "trailers" },
      grpcFrame(message),
    );
    expect(fromGrpc(reply)).toEqual(expected);
  });

  it("answers it so over gRPC-Web", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      PUT,
      { "content-type": "application/grpc-web+proto" },
      grpcFrame(NOT_PROTOBUF),
    );
    expect(fromGrpcWeb(reply)).toEqual(parseBinary);
  });

  it.each([
    ["protobuf, the short way", "application/proto", {}, NOT_PROTOBUF, parseBinary],
    [
      "protobuf, through connect-es",
      "application/proto",
      { "connect-timeout-ms": "10000" },
      NOT_PROTOBUF,
      parseBinary,
    ],
    ["JSON", "application/json", {}, NOT_JSON, invalidRequest(/./)],
  ])("answers it so over Connect, %s, with HTTP 400", async (_, type, extra, body, expected) => {
    const reply = await rawRequest(
      service.daemonUrl,
      PUT,
      { "content-type": type, "connect-protocol-version": "1", ...extra },
      body,
    );
    expect([reply.status, fromConnectUnary(reply)]).toEqual([400, expected]);
  });

  it.each([
    ["gzip", gzipSync],
    ["br", brotliCompressSync],
  ] as const)(
    "answers a %s message cut short before its end so, in every protocol",
    async (encoding, compress) => {
      const message = cutShort(compress);
      const auth = { authorization: `Bearer ${key}` };
      const decompressionFailed = invalidRequest("decompression failed");
      const grpcHeaders = {
        "content-type": "application/grpc",
        te: "trailers",
        "grpc-encoding": encoding,
      };
      for (const path of [PUT, TAIL]) {
        const grpcReply = await rawRequest(
          service.daemonUrl,
          path,
          { ...grpcHeaders, ...auth },
          compressedFrame(message),
        );
        expect(fromGrpc(grpcReply)).toEqual(decompressionFailed);
      }
      const web = await rawRequest(
        service.daemonUrl,
        PUT,
        { "content-type": "application/grpc-web+proto", "grpc-encoding": encoding, ...auth },
        compressedFrame(message),
      );
      expect(fromGrpcWeb(web)).toEqual(decompressionFailed);
      const connect = await rawRequest(
        service.daemonUrl,
        PUT,
        { "content-type": "application/json", "content-encoding": encoding, ...auth },
        message,
      );
      expect([connect.status, fromConnectUnary(connect)]).toEqual([400, decompressionFailed]);
    },
  );

  it("refuses a message past the daemon's read limit with the invalid_request ErrorInfo, in every protocol", async () => {
    const tooLarge = (message: RegExp) => ({
      code: Code.ResourceExhausted,
      message: expect.stringMatching(message),
      errorCode: "invalid_request",
      retryAfter: null,
    });
    const pastLimit = tooLarge(
      /^message size \d* ?is larger than configured readMaxBytes 1048576$/,
    );
    const oversized = Buffer.alloc(1024 * 1024 + 1);
    const grpcHeaders = { "content-type": "application/grpc", te: "trailers" };
    for (const path of [PUT, TAIL]) {
      const grpcReply = await rawRequest(
        service.daemonUrl,
        path,
        grpcHeaders,
        grpcFrame(oversized),
      );
      expect(fromGrpc(grpcReply)).toEqual(pastLimit);
    }
    const gzipped = compressedFrame(gzipSync(Buffer.alloc(2 * 1024 * 1024)));
    const inflated = tooLarge(
      /^message is larger than configured readMaxBytes 1048576 after decompression$/,
    );
    for (const path of [PUT, TAIL]) {
      const grpcReply = await rawRequest(
        service.daemonUrl,
        path,
        { ...grpcHeaders, "grpc-encoding": "gzip" },
        gzipped,
      );
      expect(fromGrpc(grpcReply)).toEqual(inflated);
    }
    const web = await rawRequest(
      service.daemonUrl,
      PUT,
      { "content-type": "application/grpc-web+proto" },
      grpcFrame(oversized),
    );
    expect(fromGrpcWeb(web)).toEqual(pastLimit);
    for (const extra of [{}, { "connect-timeout-ms": "10000" }]) {
      const connect = await rawRequest(
        service.daemonUrl,
        PUT,
        { "content-type": "application/proto", "connect-protocol-version": "1", ...extra },
        oversized,
      );
      expect([connect.status, fromConnectUnary(connect)]).toEqual([429, pastLimit]);
    }
  });

  it("answers it so on a stream, over gRPC and Connect", async () => {
    const grpcStream = await rawRequest(
      service.daemonUrl,
      TAIL,
      { "content-type": "application/grpc", te: "trailers" },
      grpcFrame(NOT_PROTOBUF),
    );
    expect(fromGrpc(grpcStream)).toEqual(parseBinary);
    const connectStream = await rawRequest(
      service.daemonUrl,
      TAIL,
      { "content-type": "application/connect+json", "connect-protocol-version": "1" },
      grpcFrame(NOT_JSON),
    );
    expect(fromConnectStream(connectStream)).toEqual(invalidRequest(/./));
  });
});
