import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { consentState, createBanner, createTeam, mintKey } from "#test/support/api.js";
import { grpcFrame, rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** decisions §7: the ErrorInfo of an invalid request, as Connect's error JSON carries it. */
const INVALID_REQUEST_DETAIL = {
  type: "consent.v1.ErrorInfo",
  value: expect.any(String),
  debug: { code: "invalid_request" },
};

/**
 * Request messages in JSON (Connect's `application/json`, gRPC's and gRPC-Web's `+json`) meet
 * the rule of the REST bodies (RFC 8259 §8.1, docs/behaviour.md): bytes that are not UTF-8 are
 * refused, never decoded into U+FFFD, which would let two different subject ids name one record.
 */
describe("JSON request messages on the daemon's port", () => {
  let service: TestService;
  let key: string;
  let publicId: string;
  const path = "/consent.v1.SubjectService/PutSubjectState";

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    ({ key } = await mintKey(service, await createTeam(service, "professional")));
    ({ publicId } = await createBanner(service, key));
  });
  afterAll(() => service.close());

  /** A PutSubjectState body in JSON whose subject id is `subjectId`'s bytes. */
  function putBody(subjectId: Buffer): Buffer {
    const [before, after] = JSON.stringify({
      bannerId: publicId,
      subjectId: "SUBJECT",
      baseVersion: 0,
      consentState: consentState(),
    }).split("SUBJECT");
    return Buffer.concat([Buffer.from(before as string), subjectId, Buffer.from(after as string)]);
  }

  /** PutSubjectState as a Connect unary call in JSON. */
  function putOverConnectJson(subjectId: Buffer) {
    return rawRequest(
      service.daemonUrl,
      path,
      {
        "content-type": "application/json",
        "connect-protocol-version": "1",
        authorization: `Bearer ${key}`,
      },
      putBody(subjectId),
    );
  }

  /** Whether a snapshot is stored for the subject id, asked over gRPC (protobuf binary). */
  async function found(subjectId: string): Promise<boolean> {
    const subjects = createClient(
      SubjectService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const answer = await subjects.resolveSubject(
      { bannerId: publicId, subjectId },
      { headers: { authorization: `Bearer ${key}` } },
    );
    return answer.found;
  }

  it("refuses a Connect JSON message that is not UTF-8 as invalid_argument, and stores nothing", async () => {
    const reply = await putOverConnectJson(Buffer.from([0x61, 0xff, 0x62]));
    expect([reply.status, JSON.parse(reply.body.toString())]).toEqual([
      400,
      {
        code: "invalid_argument",
        message: "Request message is not valid UTF-8 JSON",
        details: [INVALID_REQUEST_DETAIL],
      },
    ]);
    expect(await found("a\uFFFDb")).toBe(false);
  });

  it("refuses a gRPC JSON message that is not UTF-8 with status 3 and the reason, and stores nothing", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      path,
      { "content-type": "application/grpc+json", te: "trailers", authorization: `Bearer ${key}` },
      grpcFrame(putBody(Buffer.from([0x63, 0xc0, 0xaf]))),
    );
    // In the trailers, or in the headers of an answer that is trailers only.
    const ended = { ...reply.headers, ...reply.trailers };
    expect([
      Number(ended["grpc-status"]),
      decodeURIComponent(String(ended["grpc-message"])),
    ]).toEqual([Code.InvalidArgument, "Request message is not valid UTF-8 JSON"]);
    expect(await found("c\uFFFD\uFFFD")).toBe(false);
  });

  it("ends a Connect JSON stream whose request is not UTF-8 with invalid_argument", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      "/consent.v1.ConsentLogService/ExportConsentLogs",
      {
        "content-type": "application/connect+json",
        "connect-protocol-version": "1",
        authorization: `Bearer ${key}`,
      },
      grpcFrame(
        Buffer.concat([Buffer.from('{"bannerId":"'), Buffer.from([0xff]), Buffer.from('"}')]),
      ),
    );
    // One end-stream frame (flags 0x02) holding the error.
    expect([reply.status, reply.body[0]]).toEqual([200, 0x02]);
    expect(JSON.parse(reply.body.subarray(5).toString())).toEqual({
      error: {
        code: "invalid_argument",
        message: "Request message is not valid UTF-8 JSON",
        details: [INVALID_REQUEST_DETAIL],
      },
    });
  });

  it("reads a JSON message in UTF-8 as sent", async () => {
    const reply = await putOverConnectJson(Buffer.from("Jürgen-Größe"));
    expect(reply.status).toBe(200);
    expect(await found("Jürgen-Größe")).toBe(true);
  });
});
