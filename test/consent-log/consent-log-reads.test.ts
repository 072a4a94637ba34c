import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  LOG_STREAM_BATCH,
  MAX_EXPORTS_PER_TEAM,
  MAX_SCANS_PER_TEAM,
  MAX_TAILS_PER_TEAM,
  TAIL_FULL_SWEEP_MS,
  TAIL_MAX_LOOKBACK_MS,
  TAIL_NEAR_MS,
  TAIL_POLL_MS,
} from "#daemon/consent-log/consent-log-reads.js";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { type ConsentLogEntry, ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { createBanner, mintKey, operator } from "#test/support/api.js";
import { aChoice, bannerFixture, postLog, storedRows } from "#test/support/consent-log.js";
import { grpcWebTrailers, rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** TailConsentLogs, ConsentLogStats and ExportConsentLogs over gRPC, against real daemons. */
describe("ConsentLogService operator reads over gRPC", () => {
  let service: TestService;
  /** A second daemon on the same data directory: its appends reach the first only by polling. */
  let sibling: TestService;
  let client: ReturnType<typeof createClient<typeof ConsentLogService>>;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    sibling = await startTestService({ gateway: true, dataDir: service.dataDir });
    client = createClient(ConsentLogService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  });
  afterAll(async () => {
    await sibling.close();
    await service.close();
  });

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

  async function record(target: TestService, publicId: string, method = "consent_given") {
    const posted = await postLog(target, aChoice(publicId, { method }));
    expect(posted.status).toBe(200);
    return posted.body.consentLogId as string;
  }

  /**
   * Opens a tail as the operator (of `target`, by default the first daemon) and waits for its
   * first, empty message (the tail is following); nextIds() gives the consentLogIds of the next
   * message that carries rows.
   */
  async function follow(
    teamId: string,
    request: { methods?: string[]; bannerId?: string; consentId?: string } = {},
    target?: TestService,
  ) {
    const abort = new AbortController();
    const on = target
      ? createClient(ConsentLogService, createGrpcTransport({ baseUrl: target.daemonUrl }))
      : client;
    const token = (target ?? service).operatorToken;
    const responses = on
      .tailConsentLogs(request, { ...bearer(token, teamId), signal: abort.signal })
      [Symbol.asyncIterator]();
    expect((await responses.next()).value?.entries).toEqual([]);
    const nextIds = async (): Promise<string[]> => {
      for (;;) {
        const { value } = await responses.next();
        if (value && value.entries.length > 0)
          return value.entries.map((e: ConsentLogEntry) => e.consentLogId);
      }
    };
    return { responses, abort, nextIds };
  }

  it("tails rows recorded after it began, by this daemon and by another one, then ends on cancel", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const other = await bannerFixture(service);
    const before = await record(service, publicId);
    const tail = await follow(teamId, { methods: ["consent_given", "accept_all"] });
    const seen: string[] = [];
    await record(service, other.publicId); // another team's row: never shown
    await record(service, publicId, "accept_necessary"); // filtered out by method
    const local = await record(service, publicId);
    seen.push(...(await tail.nextIds()));
    expect(seen).toEqual([local]);
    const remote = await record(sibling, publicId, "accept_all");
    seen.push(...(await tail.nextIds()));
    expect(seen).toEqual([local, remote]);
    expect(seen).not.toContain(before);
    tail.abort.abort();
    await expect(tail.responses.next()).rejects.toMatchObject({ code: Code.Canceled });
  });

  it("follows one banner of the team when asked, not the team's other banners", async () => {
    const { teamId, key, publicId } = await bannerFixture(service);
    const second = await createBanner(service, key, { domain: "other.example.com" });
    const tail = await follow(teamId, { bannerId: publicId.toUpperCase() });
    const elsewhere = await postLog(service, aChoice(second.publicId), {
      origin: "https://other.example.com",
    });
    expect(elsewhere.status).toBe(200);
    const mine = await record(service, publicId);
    expect(await tail.nextIds()).toEqual([mine]);
    tail.abort.abort();
  });

  it("sends once a row committed late with an id below one already sent, met by its lookback sweep", async () => {
    const { teamId, id, publicId } = await bannerFixture(service);
    const tail = await follow(teamId);
    const local = await record(service, publicId);
    expect(await tail.nextIds()).toEqual([local]);
    // Another daemon whose clock runs a second behind commits its row after `local` was sent.
    const receivedAt = new Date(Date.now() - 1_000);
    const late = uuidv7({ msecs: receivedAt.getTime() });
    expect(late < local).toBe(true);
    await sibling.store.consentLog.append({
      id: late,
      teamId,
      bannerId: id,
      publicId,
      consentId: "late-commit",
      method: "consent_given",
      preferences: { necessary: true },
      occurredAt: receivedAt,
      timestampClamped: false,
      receivedAt,
    });
    expect(await tail.nextIds()).toEqual([late]);
    // Later sweeps still read `local`, the late row and `after`: none is sent again.
    const after = await record(service, publicId);
    expect(await tail.nextIds()).toEqual([after]);
    await new Promise((resolve) => setTimeout(resolve, 2 * TAIL_POLL_MS));
    const again = await record(service, publicId);
    expect(await tail.nextIds()).toEqual([again]);
    tail.abort.abort();
  });

  it("sends a row committed later than its frequent sweeps reach, as MongoDB's may be, by a sweep of the whole lookback", async () => {
    // A store whose rows may become readable 30 s after their id's time, as MongoDB declares
    // (its acknowledgement may wait out a stalled primary).
    const late = await startTestService({ gateway: true, lateRowsMs: 30_000 });
    try {
      const { teamId, id, publicId } = await bannerFixture(late);
      const tail = await follow(teamId, {}, late);
      const receivedAt = new Date(Date.now() - TAIL_NEAR_MS - 7_000);
      const row = aConsentLogRow(teamId, receivedAt, {
        bannerId: id,
        publicId,
        consentId: "acknowledged-late",
        method: "consent_given",
      });
      const appended = performance.now();
      await late.store.consentLog.append(row);
      expect(await tail.nextIds()).toEqual([row.id]);
      expect(performance.now() - appended).toBeLessThan(TAIL_FULL_SWEEP_MS + 2 * TAIL_POLL_MS);
      // Met once, never sent again by the sweeps after.
      const after = await record(late, publicId);
      expect(await tail.nextIds()).toEqual([after]);
      await new Promise((resolve) => setTimeout(resolve, TAIL_FULL_SWEEP_MS + TAIL_POLL_MS));
      const again = await record(late, publicId);
      expect(await tail.nextIds()).toEqual([again]);
      tail.abort.abort();
    } finally {
      await late.close();
    }
  }, 20_000);

  it("re-reads at most TAIL_MAX_LOOKBACK_MS, however late the store says a row may come", async () => {
    // About what MongoDB declares at the highest CONSENT_MONGODB_TIMEOUT_MS (600000).
    const late = await startTestService({ gateway: true, lateRowsMs: 40 * 60_000 });
    try {
      const { teamId, id, publicId } = await bannerFixture(late);
      const tail = await follow(teamId, {}, late);
      const aged = (ageMs: number) =>
        aConsentLogRow(teamId, new Date(Date.now() - ageMs), { bannerId: id, publicId });
      const beyond = aged(TAIL_MAX_LOOKBACK_MS + 60_000);
      const within = aged(TAIL_MAX_LOOKBACK_MS - 20_000);
      await late.store.consentLog.append(beyond);
      await late.store.consentLog.append(within);
      // The whole lookback's sweep meets the row within it, and never reads back to the other.
      expect(await tail.nextIds()).toEqual([within.id]);
      await new Promise((resolve) => setTimeout(resolve, TAIL_FULL_SWEEP_MS + TAIL_POLL_MS));
      const after = await record(late, publicId);
      expect(await tail.nextIds()).toEqual([after]);
      tail.abort.abort();
    } finally {
      await late.close();
    }
  }, 30_000);

  it("ends a tail whose key is revoked while it runs, before the next row reaches it", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const reader = await mintKey(service, teamId, { scopes: ["logs:read"] });
    const responses = client.tailConsentLogs({}, bearer(reader.key))[Symbol.asyncIterator]();
    expect((await responses.next()).value?.entries).toEqual([]);
    const { admin, auth } = operator(service);
    await admin.revokeApiKey({ id: reader.id }, auth);
    await record(service, publicId);
    const rows: ConsentLogEntry[] = [];
    const ended = await failure(
      (async () => {
        for (;;) {
          const { value, done } = await responses.next();
          if (done) return;
          rows.push(...(value?.entries ?? []));
        }
      })(),
    );
    expect(ended).toEqual([Code.Unauthenticated, "revoked_key"]);
    expect(rows).toEqual([]);
  });

  /**
   * A bound on the streams of one team a daemon runs at once: `max` streams of a team, each
   * started by `open` (which reads its first message; its controller ends it), are held, one
   * more is refused as rate_limited while another team's is not, and once one ends another is
   * taken.
   */
  async function expectBoundPerTeam(
    max: number,
    teamId: string,
    open: (team: string) => Promise<AbortController>,
  ) {
    const held = [];
    for (let i = 0; i < max; i++) held.push(await open(teamId));
    expect(await failure(open(teamId))).toEqual([Code.ResourceExhausted, "rate_limited"]);
    // Another team is not held back by this one's streams.
    (await open((await bannerFixture(service)).teamId)).abort();
    held.shift()?.abort();
    await expect
      .poll(async () => (await failure(open(teamId).then((stream) => stream.abort())))[0])
      .toBeUndefined();
    for (const stream of held) stream.abort();
  }

  it("follows at most MAX_TAILS_PER_TEAM tails of one team at once, and takes another once one ends", async () => {
    const { teamId } = await bannerFixture(service);
    await expectBoundPerTeam(MAX_TAILS_PER_TEAM, teamId, async (team) => {
      const abort = new AbortController();
      const tail = client.tailConsentLogs(
        {},
        { ...bearer(service.operatorToken, team), signal: abort.signal },
      );
      await tail[Symbol.asyncIterator]().next();
      return abort;
    });
  });

  // Regressions: a team's exports were not bounded, where its tails were: each export reads the
  // whole of the team's log, and a key with logs:read ran as many at once as its rate limit let
  // it start, every other team's calls on the daemon waiting behind them. And a server stream
  // cancelled while its message waited for its client to read never ended on the daemon, so its
  // place among the team's streams stayed taken until a restart.
  it("runs at most MAX_EXPORTS_PER_TEAM exports of one team at once, and takes another once one cancelled while held back ends", async () => {
    const { teamId } = await bannerFixture(service);
    // More rows than a few messages hold: an export whose reader stops after its first message
    // waits for it, in flight, rather than ending.
    const start = Date.now() - 3_600_000;
    await Promise.all(
      Array.from({ length: LOG_STREAM_BATCH * 3 }, (_, i) =>
        service.store.consentLog.append(aConsentLogRow(teamId, new Date(start + i))),
      ),
    );
    // Each export on a connection of its own, so the exports held back fill no flow-control
    // window another one needs.
    await expectBoundPerTeam(MAX_EXPORTS_PER_TEAM, teamId, async (team) => {
      const abort = new AbortController();
      const own = createClient(
        ConsentLogService,
        createGrpcTransport({ baseUrl: service.daemonUrl }),
      );
      const exported = own.exportConsentLogs(
        {},
        { ...bearer(service.operatorToken, team), signal: abort.signal },
      );
      await exported[Symbol.asyncIterator]().next();
      return abort;
    });
  });

  // Regression: a team's counts and filtered listings were not bounded, where its exports were:
  // each can read the whole of the team's log until the store's time limit, and a burst of them
  // kept every other team's calls on the daemon waiting behind them.
  it("runs at most MAX_SCANS_PER_TEAM counts and filtered listings of one team at once, not counting a plain page, and takes another once they end", async () => {
    const { teamId } = await bannerFixture(service);
    // Enough rows that each read below passes over the log for many turns of the event loop:
    // the calls sent together are all admitted or refused while the first ones still read.
    const start = Date.now() - 3_600_000;
    await Promise.all(
      Array.from({ length: 10_000 }, (_, i) =>
        service.store.consentLog.append(aConsentLogRow(teamId, new Date(start + i))),
      ),
    );
    const asTeam = (team: string) => bearer(service.operatorToken, team);
    // Every row is accept_all: a listing of consent_changed passes over all of them for no row.
    const count = (team: string) => client.consentLogStats({}, asTeam(team));
    const filteredList = (team: string) =>
      client.listConsentLogs({ methods: ["consent_changed"] }, asTeam(team));
    const scans = Array.from({ length: MAX_SCANS_PER_TEAM + 1 }, (_, i) =>
      (i % 2 === 0 ? count(teamId) : filteredList(teamId)).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      ),
    );
    // A page by cursor reads the rows it returns: no scan, never refused.
    const page = failure(client.listConsentLogs({ pageSize: 10 }, asTeam(teamId)));
    // Another team is not held back by this one's reads.
    const other = failure(count((await bannerFixture(service)).teamId));
    const outcomes = await Promise.all(scans);
    expect(outcomes.filter((error) => error === undefined)).toHaveLength(MAX_SCANS_PER_TEAM);
    // Refused as a 5th export is, with when to retry.
    expect(
      outcomes.flatMap((error) => {
        const info = error?.findDetails(ErrorInfoSchema)[0];
        return error ? [[error.code, info?.code, info?.retryAfterSeconds]] : [];
      }),
    ).toEqual([[Code.ResourceExhausted, "rate_limited", 5]]);
    expect(await page).toEqual([undefined, undefined]);
    expect(await other).toEqual([undefined, undefined]);
    // Once they ended, the team's counts and filtered listings are taken again.
    expect(await failure(filteredList(teamId))).toEqual([undefined, undefined]);
    expect((await count(teamId)).total).toBe(10_000n);
  });

  it("counts by method and day with the opt-in rate of explicit choices", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    await bannerFixture(service).then(({ publicId: foreign }) => record(service, foreign));
    // aChoice accepts analytics, which the default configuration does not require.
    await record(service, publicId, "consent_given");
    await record(service, publicId, "accept_all");
    await postLog(
      service,
      aChoice(publicId, { method: "accept_necessary", preferences: { necessary: true } }),
    );
    await record(service, publicId, "consent_default");
    const stats = await client.consentLogStats({}, bearer(service.operatorToken, teamId));
    const today = new Date().toISOString().slice(0, 10);
    expect(stats).toMatchObject({
      total: 4n,
      byMethod: { consent_given: 1n, accept_all: 1n, accept_necessary: 1n, consent_default: 1n },
      explicitChoices: 3n,
      optedIn: 2n,
      optInRate: 2 / 3,
    });
    expect(stats.byDay.map((d) => [d.day, d.count])).toEqual([[today, 4n]]);
    const filtered = await client.consentLogStats(
      { bannerId: publicId, methods: ["consent_default"] },
      bearer(service.operatorToken, teamId),
    );
    expect(filtered).toMatchObject({ total: 1n, explicitChoices: 0n, optInRate: 0 });
  });

  it("exports a team's rows oldest first in batches, never another team's", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const other = await bannerFixture(service);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await record(service, publicId));
    await record(service, other.publicId);
    const exported: string[] = [];
    for await (const batch of client.exportConsentLogs({}, bearer(service.operatorToken, teamId))) {
      exported.push(...batch.entries.map((e) => e.consentLogId));
    }
    expect(exported).toEqual(ids);
    const reader = await mintKey(service, other.teamId, {
      scopes: ["logs:read"],
      environment: "test",
    });
    const theirs: string[] = [];
    // A key of the other team naming this team's banner still reads only its own rows.
    for await (const batch of client.exportConsentLogs(
      { bannerId: publicId },
      bearer(reader.key),
    )) {
      theirs.push(...batch.entries.map((e) => e.consentLogId));
    }
    expect(theirs).toEqual([]);
    const stats = await client.consentLogStats({ bannerId: publicId }, bearer(reader.key));
    expect(stats.total).toBe(0n);
  });

  it("exports without an end every row stored when it began, also rows received before the clock was set back", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const id = await record(service, publicId);
    const [row] = await storedRows(service, teamId);
    if (!row) throw new Error("the choice was not stored");
    // Received an hour from now by this clock: before the clock was set back by an hour.
    const later = new Date(Date.now() + 3_600_000);
    const before = { ...row, id: uuidv7({ msecs: later.getTime() }), receivedAt: later };
    await service.store.consentLog.append(before);
    const exported: string[] = [];
    for await (const batch of client.exportConsentLogs({}, bearer(service.operatorToken, teamId))) {
      exported.push(...batch.entries.map((e) => e.consentLogId));
    }
    expect(exported).toEqual([id, before.id]);
  });

  it("needs the operator token with a team, or a key with logs:read, and known methods", async () => {
    const { teamId } = await bannerFixture(service);
    const drain = async (stream: AsyncIterable<unknown>) => {
      for await (const _ of stream) break;
    };
    expect(await failure(client.consentLogStats({}))).toEqual([
      Code.Unauthenticated,
      "unauthorized",
    ]);
    expect(
      await failure(drain(client.exportConsentLogs({}, bearer(service.operatorToken)))),
    ).toEqual([Code.InvalidArgument, "invalid_request"]);
    const writer = await mintKey(service, teamId, { scopes: ["banners:read"] });
    expect(await failure(drain(client.tailConsentLogs({}, bearer(writer.key))))).toEqual([
      Code.PermissionDenied,
      "missing_scope",
    ]);
    expect(
      await failure(
        client.consentLogStats({ methods: ["reject_all"] }, bearer(service.operatorToken, teamId)),
      ),
    ).toEqual([Code.InvalidArgument, "invalid_request"]);
    // An empty range selects nothing by construction: refused, as consentctl refuses it.
    const hour = timestampFromDate(new Date(Date.now() - 3_600_000));
    const now = timestampFromDate(new Date());
    for (const range of [
      { since: now, until: hour },
      { since: now, until: now },
    ]) {
      expect(
        await failure(client.consentLogStats(range, bearer(service.operatorToken, teamId))),
      ).toEqual([Code.InvalidArgument, "invalid_request"]);
      expect(
        await failure(client.listConsentLogs(range, bearer(service.operatorToken, teamId))),
      ).toEqual([Code.InvalidArgument, "invalid_request"]);
    }
  });

  it("refuses a banner filter that is not a public id, rather than selecting nothing", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    await record(service, publicId);
    const operator = bearer(service.operatorToken, teamId);
    const drain = async (stream: AsyncIterable<unknown>) => {
      for await (const _ of stream) break;
    };
    for (const bannerId of ["zz", "x".repeat(5_000)]) {
      expect(await failure(client.listConsentLogs({ bannerId }, operator))).toEqual([
        Code.InvalidArgument,
        "invalid_request",
      ]);
      expect(await failure(client.consentLogStats({ bannerId }, operator))).toEqual([
        Code.InvalidArgument,
        "invalid_request",
      ]);
      expect(await failure(drain(client.exportConsentLogs({ bannerId }, operator)))).toEqual([
        Code.InvalidArgument,
        "invalid_request",
      ]);
    }
    // The public id in capitals is the same banner.
    const listed = await client.listConsentLogs({ bannerId: publicId.toUpperCase() }, operator);
    expect(listed.entries).toHaveLength(1);
  });

  it("reads one consent record's rows in list, export, stats and tail, and refuses a consentId that is no UUID", async () => {
    const { teamId, publicId } = await bannerFixture(service);
    const consentId = crypto.randomUUID();
    const post = async (method: string, id = consentId) => {
      const posted = await postLog(service, aChoice(publicId, { method, consentId: id }));
      expect(posted.status).toBe(200);
      return posted.body.consentLogId as string;
    };
    const given = await post("consent_given");
    await post("accept_all", crypto.randomUUID());
    const changed = await post("consent_changed");
    const operator = bearer(service.operatorToken, teamId);
    // A consentId in capitals is the same record, as the log route takes it.
    const filter = { consentId: consentId.toUpperCase() };
    const listed = await client.listConsentLogs(filter, operator);
    expect(listed.entries.map((e) => e.consentLogId)).toEqual([changed, given]);
    expect(listed.entries.map((e) => e.consentId)).toEqual([consentId, consentId]);
    const exported: string[] = [];
    for await (const batch of client.exportConsentLogs(filter, operator)) {
      exported.push(...batch.entries.map((e) => e.consentLogId));
    }
    expect(exported).toEqual([given, changed]);
    const stats = await client.consentLogStats(filter, operator);
    expect(stats).toMatchObject({ total: 2n, explicitChoices: 2n });
    const tail = await follow(teamId, { consentId });
    await post("accept_all", crypto.randomUUID());
    const next = await post("accept_necessary");
    expect(await tail.nextIds()).toEqual([next]);
    tail.abort.abort();
    const refused = await client.listConsentLogs({ consentId: "visitor-42" }, operator).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(refused?.code).toBe(Code.InvalidArgument);
    expect(refused?.findDetails(ErrorInfoSchema)[0]?.details).toEqual([
      expect.objectContaining({
        field: "consentId",
        message: "consentId must be a UUID (the consentId of a consent log row)",
      }),
    ]);
    expect(await failure(client.consentLogStats({ consentId: "x" }, operator))).toEqual([
      Code.InvalidArgument,
      "invalid_request",
    ]);
  });

  it("refuses the banner's own id as a filter, naming its public id", async () => {
    const { teamId, id, publicId } = await bannerFixture(service);
    const operator = bearer(service.operatorToken, teamId);
    const refused = await client.listConsentLogs({ bannerId: id }, operator).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(refused?.code).toBe(Code.InvalidArgument);
    expect(refused?.findDetails(ErrorInfoSchema)[0]?.details[0]).toMatchObject({
      field: "bannerId",
      message: `bannerId must be a banner's publicId: ${id} is the id of the banner whose publicId is ${publicId}`,
    });
    expect(await failure(client.consentLogStats({ bannerId: id }, operator))).toEqual([
      Code.InvalidArgument,
      "invalid_request",
    ]);
    // Another team's banner id is no banner of this team: a filter that selects nothing, though
    // the team has a row a dropped filter would list.
    expect((await postLog(service, aChoice(publicId))).status).toBe(200);
    expect((await client.listConsentLogs({}, operator)).entries).toHaveLength(1);
    const other = await bannerFixture(service);
    const foreign = await client.listConsentLogs({ bannerId: other.id }, operator);
    expect(foreign.entries).toEqual([]);
  });

  it("refuses a request message that is not protobuf binary, or flagged compressed without a compression, as invalid_argument, in each protocol", async () => {
    // A stream's request is parsed inside the interceptors, unlike a unary call's.
    const path = "/consent.v1.ConsentLogService/TailConsentLogs";
    const unreadable = Buffer.from([0, 0, 0, 0, 2, 0x0a, 0xff]);
    const grpc = await rawRequest(
      service.daemonUrl,
      path,
      { "content-type": "application/grpc", te: "trailers" },
      unreadable,
    );
    expect([grpc.trailers["grpc-status"], grpc.trailers["grpc-message"]]).toEqual([
      "3",
      // The gRPC protocol percent-encodes only bytes outside printable ASCII, and "%".
      expect.stringMatching(/^parse binary: /),
    ]);
    const web = await rawRequest(
      service.daemonUrl,
      path,
      { "content-type": "application/grpc-web+proto" },
      unreadable,
    );
    expect(grpcWebTrailers(web.body)["grpc-status"]).toBe("3");
    const connect = await rawRequest(
      service.daemonUrl,
      path,
      { "content-type": "application/connect+proto", "connect-protocol-version": "1" },
      unreadable,
    );
    // Connect streaming ends with a frame (flag 0x02) holding the end-stream JSON.
    expect([connect.status, connect.body[0]]).toEqual([200, 2]);
    expect(JSON.parse(connect.body.subarray(5).toString())).toEqual({
      error: {
        code: "invalid_argument",
        message: expect.stringMatching(/^parse binary: /),
        // The ErrorInfo (invalid_request) of every invalid request (decisions §7).
        details: [expect.objectContaining({ debug: { code: "invalid_request" } })],
      },
    });
    // A message flagged compressed in a call that names no compression is as malformed, on a
    // stream and on a unary call alike.
    const compressed = Buffer.from([1, 0, 0, 0, 0]);
    for (const streamOrUnary of [path, "/grpc.health.v1.Health/Check"]) {
      const flagged = await rawRequest(
        service.daemonUrl,
        streamOrUnary,
        { "content-type": "application/grpc", te: "trailers" },
        compressed,
      );
      expect([streamOrUnary, flagged.trailers["grpc-status"]]).toEqual([streamOrUnary, "3"]);
    }
  });
});
