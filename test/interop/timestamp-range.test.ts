import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { createTeam, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * A google.protobuf.Timestamp outside the type's own range (0001-01-01 to 9999-12-31) in a typed
 * request is a violation of its field (400 invalid_request, INVALID_ARGUMENT), never a date
 * stored past year 9999 or one a JavaScript Date cannot hold: milliseconds or microseconds sent
 * as seconds are an easy mistake of a raw gRPC client, and protobuf-es' binary reader, like any
 * other, accepts them.
 */
describe("Timestamps of typed requests", () => {
  let service: TestService;
  let admin: ReturnType<typeof createClient<typeof AdminService>>;
  let logs: ReturnType<typeof createClient<typeof ConsentLogService>>;
  beforeAll(async () => {
    service = await startTestService();
    const transport = createGrpcTransport({ baseUrl: service.daemonUrl });
    admin = createClient(AdminService, transport);
    logs = createClient(ConsentLogService, transport);
  });
  afterAll(() => service.close());

  const operator = (team?: string) => ({
    headers: {
      authorization: `Bearer ${service.operatorToken}`,
      ...(team && { "consent-team": team }),
    },
  });
  const seconds = (value: bigint, nanos = 0): Timestamp =>
    create(TimestampSchema, { seconds: value, nanos });
  const RANGE = "must be a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z";

  async function refusal(call: Promise<unknown>) {
    const error = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    const info = error?.findDetails(ErrorInfoSchema)[0];
    return {
      code: error?.code,
      errorCode: info?.code,
      details: info?.details.map(({ field, message }) => ({ field, message })),
    };
  }

  it("refuses a key expiry outside the range, stores no key, and keeps the team's list readable", async () => {
    const teamId = await createTeam(service);
    const valid = { teamId, environment: "live", scopes: ["banners:read"], name: "k" };
    for (const expiresAt of [
      seconds(10n ** 15n), // microseconds as seconds: no JavaScript Date
      seconds(1_795_752_000_000n), // milliseconds as seconds: year 58875
      seconds(-62_135_596_801n), // a second before 0001-01-01
      seconds(1_795_752_000n, -1), // a negative nanos
    ]) {
      expect(await refusal(admin.createApiKey({ ...valid, expiresAt }, operator()))).toEqual({
        code: Code.InvalidArgument,
        errorCode: "invalid_request",
        details: [{ field: "expiresAt", message: `expiresAt ${RANGE}` }],
      });
    }
    expect((await admin.listApiKeys({ teamId }, operator())).apiKeys).toEqual([]);
    const last = seconds(253_402_300_799n, 999_999_999);
    const kept = await admin.createApiKey({ ...valid, expiresAt: last }, operator());
    expect(kept.apiKey?.expiresAt?.seconds).toBe(253_402_300_799n);
    expect((await admin.listApiKeys({ teamId }, operator())).apiKeys).toHaveLength(1);
  });

  it("names every failing field of a key in one answer, a past expiry included", async () => {
    const teamId = await createTeam(service);
    const answer = await refusal(
      admin.createApiKey(
        {
          teamId,
          environment: "prod",
          scopes: ["banners:read"],
          name: "x".repeat(300),
          expiresAt: timestampFromDate(new Date("2020-01-01T00:00:00Z")),
        },
        operator(),
      ),
    );
    expect(answer.details?.map((d) => d.field).sort()).toEqual([
      "environment",
      "expiresAt",
      "name",
    ]);
    expect(answer.details).toContainEqual({
      field: "expiresAt",
      message: "expiresAt must be in the future",
    });
  });

  it("refuses a log query's since or until outside the range instead of ignoring it", async () => {
    const teamId = await createTeam(service);
    const { key } = await mintKey(service, teamId, { scopes: ["logs:read"] });
    const auth = { headers: { authorization: `Bearer ${key}` } };
    const huge = seconds(10n ** 15n);
    for (const call of [
      () => logs.listConsentLogs({ since: huge }, auth),
      () => logs.consentLogStats({ since: huge }, auth),
      () => logs.listConsentLogs({ since: huge }, operator(teamId)),
    ]) {
      expect(await refusal(call())).toEqual({
        code: Code.InvalidArgument,
        errorCode: "invalid_request",
        details: [{ field: "since", message: `since ${RANGE}` }],
      });
    }
    expect(
      (await refusal(logs.listConsentLogs({ until: seconds(1_795_752_000_000n) }, auth))).details,
    ).toEqual([{ field: "until", message: `until ${RANGE}` }]);
    expect((await logs.listConsentLogs({ since: seconds(0n) }, auth)).entries).toEqual([]);
  });
});
