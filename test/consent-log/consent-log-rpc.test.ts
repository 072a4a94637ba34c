import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { mintKey } from "#test/support/api.js";
import { aChoice, bannerFixture, postLog } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** ConsentLogService over gRPC: internal callers record; operators and logs:read keys list. */
describe("ConsentLogService over gRPC", () => {
  let service: TestService;
  let client: ReturnType<typeof createClient<typeof ConsentLogService>>;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    client = createClient(ConsentLogService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  });
  afterAll(() => service.close());

  const bearer = (token: string, team?: string) => ({
    headers: { authorization: `Bearer ${token}`, ...(team && { "consent-team": team }) },
  });

  async function failure(call: Promise<unknown>): Promise<[Code, string | undefined]> {
    const error = await call.then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    return [error?.code as Code, error?.findDetails(ErrorInfoSchema)[0]?.code];
  }

  it("records from an internal caller with typed fields, under the same rules", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const recorded = await client.recordConsent({
      bannerId: publicId,
      preferences: { necessary: true },
      services: { necessary: { names: ["Shop session", "Cloudflare"] } },
      method: "accept_necessary",
      timestamp: new Date().toISOString(),
      requestOrigin: { origin: "https://shop.example.com" },
    });
    expect(recorded.managePreferences).toMatch(/\/preferences\//);
    const { entries } = await client.listConsentLogs({}, bearer(service.operatorToken, teamId));
    expect(entries.map((e) => [e.consentLogId, e.method, e.services.necessary?.names])).toEqual([
      [recorded.consentLogId, "accept_necessary", ["Shop session", "Cloudflare"]],
    ]);
    const elsewhere = client.recordConsent({
      bannerId: publicId,
      preferences: {},
      method: "accept_all",
      timestamp: new Date().toISOString(),
      requestOrigin: { origin: "https://evil.test" },
    });
    expect(await failure(elsewhere)).toEqual([Code.PermissionDenied, "domain_not_authorized"]);
    const controlled = client.recordConsent({
      bannerId: publicId,
      preferences: { necessary: true },
      services: { necessary: { names: ["Shop\u0000session"] } },
      method: "accept_all",
      timestamp: new Date().toISOString(),
      requestOrigin: { origin: "https://shop.example.com" },
    });
    expect(await failure(controlled)).toEqual([Code.InvalidArgument, "invalid_request"]);
  });

  it("lists newest first with filters and page tokens (operator with consent-team)", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const other = await bannerFixture(service);
    const methods = [
      "accept_all",
      "consent_default",
      "accept_all",
      "consent_changed",
      "accept_all",
    ];
    const ids: string[] = [];
    for (const method of methods) {
      ids.push((await postLog(service, aChoice(publicId, { method }))).body.consentLogId);
    }
    await postLog(service, aChoice(other.publicId));
    const auth = bearer(service.operatorToken, teamId);
    const pages: string[][] = [];
    let pageToken = "";
    do {
      const page = await client.listConsentLogs(
        { bannerId: publicId, methods: ["accept_all", "consent_changed"], pageSize: 2, pageToken },
        auth,
      );
      pages.push(page.entries.map((e) => e.consentLogId));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(pages).toEqual([
      [ids[4], ids[3]],
      [ids[2], ids[0]],
    ]);
    const [entry] = (await client.listConsentLogs({ pageSize: 1 }, auth)).entries;
    expect(entry).toMatchObject({
      consentLogId: ids[4],
      bannerId: publicId,
      method: "accept_all",
    });
    expect(entry?.receivedAt).toBeDefined();
  });

  it("selects by since (inclusive) and until (exclusive) to the nanosecond, in lists, counts and exports", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    await postLog(service, aChoice(publicId));
    const auth = bearer(service.operatorToken, teamId);
    const [row] = (await client.listConsentLogs({}, auth)).entries;
    const at = row?.receivedAt;
    if (!at) throw new Error("the row has no receivedAt");
    // Rows are received to the millisecond: a bound a nanosecond past a row's time is after it.
    const justAfter = create(TimestampSchema, { seconds: at.seconds, nanos: at.nanos + 1 });
    const selected = async (range: { since?: Timestamp; until?: Timestamp }) => {
      const listed = (await client.listConsentLogs(range, auth)).entries.length;
      const counted = Number((await client.consentLogStats(range, auth)).total);
      let exported = 0;
      for await (const batch of client.exportConsentLogs(range, auth)) {
        exported += batch.entries.length;
      }
      return [listed, counted, exported];
    };
    expect(await selected({ since: at })).toEqual([1, 1, 1]);
    expect(await selected({ since: justAfter })).toEqual([0, 0, 0]);
    expect(await selected({ until: justAfter })).toEqual([1, 1, 1]);
    expect(await selected({ until: at })).toEqual([0, 0, 0]);
    // A range within one millisecond holds no row, but is a range: not refused as empty.
    const later = create(TimestampSchema, { seconds: at.seconds, nanos: at.nanos + 2 });
    expect(await selected({ since: justAfter, until: later })).toEqual([0, 0, 0]);
  });

  it("needs the operator token with a team, or a key with logs:read", async () => {
    const { teamId } = await bannerFixture(service);
    expect(await failure(client.listConsentLogs({}))).toEqual([
      Code.Unauthenticated,
      "unauthorized",
    ]);
    expect(await failure(client.listConsentLogs({}, bearer(service.operatorToken)))).toEqual([
      Code.InvalidArgument,
      "invalid_request",
    ]);
    const reader = await mintKey(service, teamId, { scopes: ["logs:read"], environment: "test" });
    expect((await client.listConsentLogs({}, bearer(reader.key))).entries).toEqual([]);
    const writer = await mintKey(service, teamId, { scopes: ["banners:read"] });
    expect(await failure(client.listConsentLogs({}, bearer(writer.key)))).toEqual([
      Code.PermissionDenied,
      "missing_scope",
    ]);
  });

  it("refuses a page size over 1,000, a foreign page token and unknown methods", async () => {
    const { teamId } = await bannerFixture(service);
    const auth = bearer(service.operatorToken, teamId);
    for (const request of [{ pageSize: 1001 }, { pageToken: "abc" }, { methods: ["reject_all"] }]) {
      expect(await failure(client.listConsentLogs(request, auth))).toEqual([
        Code.InvalidArgument,
        "invalid_request",
      ]);
    }
  });
});
