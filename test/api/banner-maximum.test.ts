import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_BANNERS_PER_TEAM } from "#daemon/banners/banner-rules.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { createTeam, http, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { fillForQueuedLists, listOnItsOwnConnection } from "#test/support/team-lists.js";

/** Creates sent together at most, while a team is filled up to its maximum. */
const BATCH = 25;
/** The team's last places, and the creates that race for them: five more. */
const LAST_PLACES = 10;
const RACING = LAST_PLACES + 5;

/**
 * A team's banners are bounded (docs/behaviour.md "Banners"): GET /api/v1/banners answers every
 * one of them whole (spec 4.2), so their number bounds what one list holds. The regression: a
 * team could create without end, and four lists of 1,000 banners filled a daemon's heap.
 */
describe(`at most ${MAX_BANNERS_PER_TEAM} banners per team`, () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
  });
  afterAll(() => service.close());

  const create = (key: string, n: number) =>
    http(service, "POST", "/api/v1/banners", {
      key,
      body: { name: `Site ${n}`, domain: `site${n}.example.com`, configuration: {} },
    });

  it("refuses the banner past the maximum with 409 failed_precondition, even when creates race, and lists them all", async () => {
    // The business plan's 2,000 requests per 15 minutes leave room for the 250 creates.
    const teamKey = (await mintKey(service, await createTeam(service, "business"))).key;
    const filled = MAX_BANNERS_PER_TEAM - LAST_PLACES;
    for (let start = 0; start < filled; start += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, filled - start) }, (_, i) => start + i);
      const results = await Promise.all(batch.map((n) => create(teamKey, n)));
      expect(results.map((result) => result.status)).toEqual(batch.map(() => 201));
    }
    const racing = await Promise.all(
      Array.from({ length: RACING }, (_, i) => create(teamKey, filled + i)),
    );
    const statuses = racing.map((result) => result.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(LAST_PLACES);
    expect(statuses.filter((status) => status === 409)).toHaveLength(RACING - LAST_PLACES);

    const refused = await create(teamKey, 1_000);
    expect(refused.status).toBe(409);
    // spec 7: the error envelope, with a code as the webhooks' maximum answers (not a
    // validation failure, which has none on banner routes).
    expect(refused.body).toEqual({
      data: {
        error: `This team has ${MAX_BANNERS_PER_TEAM} banners, the most it may have, and banners cannot be deleted; instead, reuse a banner the team no longer needs (an update changes its name, domain and configuration), or serve more sites with one banner by listing them in its configuration's additionalDomains`,
        code: "failed_precondition",
      },
      version: "v1",
    });
    expect(racing.filter((result) => result.status === 409).map((r) => r.body)).toEqual(
      Array.from({ length: RACING - LAST_PLACES }, () => refused.body),
    );

    // gRPC callers get the same refusal as FAILED_PRECONDITION.
    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const overGrpc = await banners
      .createBanner(
        { name: "One more", domain: "more.example.com", configuration: {} },
        { headers: { authorization: `Bearer ${teamKey}` } },
      )
      .then(
        () => undefined,
        (error: unknown) => ConnectError.from(error),
      );
    expect([overGrpc?.code, overGrpc?.rawMessage]).toEqual([
      Code.FailedPrecondition,
      refused.body.data.error,
    ]);

    // Two lists of the team at once (the daemon runs them one after the other): both whole.
    const lists = await Promise.all([
      http(service, "GET", "/api/v1/banners", { key: teamKey }),
      http(service, "GET", "/api/v1/banners", { key: teamKey }),
    ]);
    expect(lists.map((list) => list.status)).toEqual([200, 200]);
    const [first, second] = lists.map((list) => list.body.data.banners);
    expect(first).toHaveLength(MAX_BANNERS_PER_TEAM);
    expect(second).toEqual(first);
    const names = new Set(first.map((banner: { name: string }) => banner.name));
    expect(names.size).toBe(MAX_BANNERS_PER_TEAM);
    expect(names.has("Site 1000")).toBe(false);

    // What the refusal suggests instead still works: an update of one of them.
    const reused = await http(service, "PATCH", `/api/v1/banners/${first[0].id}`, {
      key: teamKey,
      body: { name: "Reused", domain: "new-site.example.com" },
    });
    expect([reused.status, reused.body.data.banner.name]).toEqual([200, "Reused"]);

    // Another team has a maximum of its own.
    const otherKey = (await mintKey(service, await createTeam(service))).key;
    expect((await create(otherKey, 0)).status).toBe(201);
  });

  it("answers a team's long lists one at a time on the daemon port, each once the one before has left, and holds no other team's", async () => {
    const teamKey = (await mintKey(service, await createTeam(service))).key;
    await fillForQueuedLists(service, teamKey);
    const otherKey = (await mintKey(service, await createTeam(service))).key;
    expect((await create(otherKey, 0)).status).toBe(201);

    // The stand-alone gateway's way of calling (binary Connect unary), each on a connection of
    // its own. The first list's reader reads nothing yet.
    const stalled = listOnItsOwnConnection(service.daemonUrl, teamKey, { reading: false });
    await stalled.answerStarted;
    const next = listOnItsOwnConnection(service.daemonUrl, teamKey);
    const other = await listOnItsOwnConnection(service.daemonUrl, otherKey).body;
    expect(other.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(next.started()).toBe(false);

    stalled.read();
    const [first, second] = await Promise.all([stalled.body, next.body]);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(first.bytes).toBeGreaterThan(200_000);
    expect(second.bytes).toBe(first.bytes);
  });
});
