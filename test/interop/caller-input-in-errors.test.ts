import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERROR_DETAILS_BYTES } from "#daemon/errors.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { Health } from "#gen/grpc/health/v1/health_pb.js";
import { createBanner, createTeam, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * A failure's message quotes what the caller sent, and gRPC carries it in trailers, which Node
 * refuses past 64 KB: however long the caller's text, the call ends in its own answer (spec 7's
 * code, decisions §7's ErrorInfo), never in a reset that a client reads as INTERNAL.
 */
describe("caller input quoted in a failure over gRPC", () => {
  let service: TestService;
  let transport: ReturnType<typeof createGrpcTransport>;
  let publicId: string;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    transport = createGrpcTransport({ baseUrl: service.daemonUrl });
    const { key } = await mintKey(service, await createTeam(service, "professional"));
    ({ publicId } = await createBanner(service, key));
  });
  afterAll(() => service.close());

  const operator = () => ({ headers: { authorization: `Bearer ${service.operatorToken}` } });
  async function refusal(call: Promise<unknown>) {
    const error = await call.then(
      () => {
        throw new Error("expected the call to fail");
      },
      (reason: unknown) => ConnectError.from(reason),
    );
    const info = error.findDetails(ErrorInfoSchema)[0];
    return {
      code: error.code,
      message: error.rawMessage,
      errorCode: info?.code,
      details: info?.details.map(({ field, message }) => ({ field, message })),
    };
  }

  it("refuses a 30,000-character origin as domain_not_authorized, quoting it cut short", async () => {
    const logs = createClient(ConsentLogService, transport);
    const origin = `https://${"a".repeat(30_000)}.example.com`;
    const refused = await refusal(
      logs.recordConsent({
        bannerId: publicId,
        preferences: { necessary: true },
        method: "accept_all",
        timestamp: new Date().toISOString(),
        requestOrigin: { origin },
      }),
    );
    expect([refused.code, refused.errorCode]).toEqual([
      Code.PermissionDenied,
      "domain_not_authorized",
    ]);
    // The site as the message names it (its host), cut, and the sentence after it whole.
    expect(refused.message).toMatch(/^a{199}… is not a domain this banner is configured for$/);
  });

  it("answers a body with many long unknown fields as INVALID_ARGUMENT, its details bounded", async () => {
    const { key } = await mintKey(service, await createTeam(service, "professional"));
    const banners = createClient(BannerService, transport);
    // 60 unknown fields of 600 three-byte characters: 108 KB of field names alone.
    const body = Object.fromEntries(
      Array.from({ length: 60 }, (_, i) => [`${i}${"語".repeat(600)}`, true]),
    );
    const refused = await refusal(
      banners.createBanner(
        { json: Buffer.from(JSON.stringify({ name: "n", domain: "d.example.com", ...body })) },
        { headers: { authorization: `Bearer ${key}` } },
      ),
    );
    expect(refused.code).toBe(Code.InvalidArgument);
    const details = refused.details ?? [];
    expect(details.at(-1)?.message).toMatch(/^…and \d+ more$/);
    const bytes = details.reduce(
      (sum, d) => sum + Buffer.byteLength(d.field) + Buffer.byteLength(d.message),
      0,
    );
    // As many whole details as the bound holds, not the last line alone.
    expect(bytes).toBeGreaterThan(ERROR_DETAILS_BYTES / 2);
    expect(bytes).toBeLessThanOrEqual(ERROR_DETAILS_BYTES + 100);
  });

  it("answers a Health check of a 70,000-character service name as an unknown service", async () => {
    const health = createClient(Health, transport);
    const refused = await refusal(health.check({ service: "s".repeat(70_000) }));
    expect(refused.code).toBe(Code.NotFound);
    expect(refused.message).toMatch(/^unknown service s+…$/);
  });

  it("answers a 5,000-character team id as no such team", async () => {
    const admin = createClient(AdminService, transport);
    const refused = await refusal(admin.getTeam({ id: "t".repeat(5_000) }, operator()));
    expect([refused.code, refused.errorCode]).toEqual([Code.NotFound, "not_found"]);
    expect(refused.message).toMatch(/^No team with id t+…$/);
  });

  it("refuses an operator call without the id it names its record by, saying which", async () => {
    const admin = createClient(AdminService, transport);
    const calls: [string, Promise<unknown>][] = [
      ["id", admin.getTeam({}, operator())],
      ["id", admin.setTeamPlan({ plan: "free" }, operator())],
      ["teamId", admin.listApiKeys({}, operator())],
      ["id", admin.revokeApiKey({}, operator())],
      ["id", admin.rotateApiKey({}, operator())],
      ["teamId", admin.createSession({}, operator())],
      ["teamId", admin.listSessions({}, operator())],
      ["id", admin.revokeSession({}, operator())],
    ];
    for (const [field, call] of calls) {
      expect(await refusal(call)).toEqual({
        code: Code.InvalidArgument,
        message: "Request validation failed",
        errorCode: "invalid_request",
        details: [{ field, message: `${field} is required` }],
      });
    }
  });
});
