import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CreateTeamRequestSchema } from "#gen/consent/v1/admin_pb.js";
import { operator } from "#test/support/api.js";
import { grpcFrame, grpcWebTrailers, rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

const CHECK = "/grpc.health.v1.Health/Check";
const CREATE_TEAM = "/consent.v1.AdminService/CreateTeam";

/** A gRPC call's status and message: in the trailers, or in the headers of a trailers-only answer. */
async function grpcStatus(
  url: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
) {
  const reply = await rawRequest(
    url,
    path,
    { "content-type": "application/grpc", te: "trailers", ...headers },
    body,
  );
  const ended = { ...reply.headers, ...reply.trailers };
  return [ended["grpc-status"], ended["grpc-message"] && decodeURI(String(ended["grpc-message"]))];
}

/**
 * A deadline of zero has passed on arrival (gRPC's TimeoutValue is a positive integer): the call
 * is answered DEADLINE_EXCEEDED, as grpc-go and grpc-java end it, and never carried out.
 */
describe("a call whose deadline has passed on arrival", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it.each(["0n", "0u", "0m", "0S", "0M", "0H", "00000000S"])(
    "is DEADLINE_EXCEEDED over gRPC (grpc-timeout: %s)",
    async (timeout) => {
      expect(
        await grpcStatus(service.daemonUrl, CHECK, { "grpc-timeout": timeout }, grpcFrame()),
      ).toEqual(["4", "the operation timed out"]);
    },
  );

  it("is DEADLINE_EXCEEDED in gRPC-Web's trailers", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      CHECK,
      { "content-type": "application/grpc-web+proto", "grpc-timeout": "0n" },
      grpcFrame(),
    );
    expect(grpcWebTrailers(reply.body)["grpc-status"]).toBe("4");
  });

  it.each([
    ["application/json", Buffer.from("{}")],
    ["application/proto", Buffer.alloc(0)],
  ])(
    "is a Connect deadline_exceeded error, HTTP 504 (%s, connect-timeout-ms: 0)",
    async (type, body) => {
      const reply = await rawRequest(
        service.daemonUrl,
        CHECK,
        { "content-type": type, "connect-protocol-version": "1", "connect-timeout-ms": "0" },
        body,
      );
      expect([reply.status, JSON.parse(reply.body.toString())]).toEqual([
        504,
        { code: "deadline_exceeded", message: "the operation timed out" },
      ]);
    },
  );

  it("is not carried out: a team created under a zero deadline is not stored", async () => {
    const { admin, auth } = operator(service);
    const request = create(CreateTeamRequestSchema, { name: "Too late", plan: "professional" });
    const status = await grpcStatus(
      service.daemonUrl,
      CREATE_TEAM,
      { "grpc-timeout": "0S", authorization: auth.headers.authorization as string },
      grpcFrame(toBinary(CreateTeamRequestSchema, request)),
    );
    expect(status[0]).toBe("4");
    const { teams } = await admin.listTeams({}, auth);
    expect(teams.map((team) => team.name)).not.toContain("Too late");
  });

  it("runs under a deadline still ahead, and under the other protocol's header of zero", async () => {
    expect(
      await grpcStatus(service.daemonUrl, CHECK, { "grpc-timeout": "1S" }, grpcFrame()),
    ).toEqual(["0", undefined]);
    expect(
      await grpcStatus(service.daemonUrl, CHECK, { "connect-timeout-ms": "0" }, grpcFrame()),
    ).toEqual(["0", undefined]);
    const connect = await rawRequest(
      service.daemonUrl,
      CHECK,
      { "content-type": "application/json", "connect-protocol-version": "1", "grpc-timeout": "0n" },
      Buffer.from("{}"),
    );
    expect([connect.status, JSON.parse(connect.body.toString())]).toEqual([
      200,
      { status: "SERVING" },
    ]);
  });
});
