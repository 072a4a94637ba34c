import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { createTeam } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { failureOf } from "#test/support/stand-in-daemon.js";

/**
 * The embedded store's time limit of one consent log read, over gRPC against a real daemon whose
 * limit is 0: every read stops at its first check, a thousand rows in, so a read that passes over
 * more rows than that answers as one past the limit, and one of fewer rows answers.
 */
describe("consent log reads past the embedded store's time limit", () => {
  const rows = 2_500;
  let service: TestService;
  let teamId: string;
  let client: ReturnType<typeof createClient<typeof ConsentLogService>>;
  let asOperator: { headers: Record<string, string> };
  beforeAll(async () => {
    service = await startTestService({ logReadLimitMs: 0 });
    teamId = await createTeam(service);
    asOperator = {
      headers: { authorization: `Bearer ${service.operatorToken}`, "consent-team": teamId },
    };
    client = createClient(ConsentLogService, createGrpcTransport({ baseUrl: service.daemonUrl }));
    const start = Date.now() - 3_600_000;
    await Promise.all(
      Array.from({ length: rows }, (_, i) =>
        service.store.consentLog.append(aConsentLogRow(teamId, new Date(start + i))),
      ),
    );
  });
  afterAll(async () => {
    await service?.close();
  });

  it("answers a listing, a count and an export that pass over every row with failed_precondition query_too_broad, saying how to narrow it", async () => {
    const narrow = {
      code: Code.FailedPrecondition,
      errorCode: "query_too_broad",
      message:
        "The query passes over more of the team's consent log than the store reads within its limit of 0 s a read; narrow its time range (since, until) or name a banner",
      retryAfter: null,
    };
    // A method no row has: the listing passes over the whole log for none.
    const none = { methods: ["consent_changed"] };
    expect(await failureOf(client.listConsentLogs(none, asOperator))).toEqual(narrow);
    expect(await failureOf(client.consentLogStats({}, asOperator))).toEqual(narrow);
    const exported = (async () => {
      for await (const _ of client.exportConsentLogs(none, asOperator));
    })();
    expect(await failureOf(exported)).toEqual(narrow);
  });

  it("answers reads of fewer rows than its first check, and a tail, which reads only the newest rows", async () => {
    const page = await client.listConsentLogs({ pageSize: 50 }, asOperator);
    expect(page.entries).toHaveLength(50);
    expect(page.nextPageToken).not.toBe("");
    const abort = new AbortController();
    const tail = client
      .tailConsentLogs({}, { ...asOperator, signal: abort.signal })
      [Symbol.asyncIterator]();
    expect((await tail.next()).value?.entries).toEqual([]);
    abort.abort();
  });
});
