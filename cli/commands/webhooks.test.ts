import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { argv, cliFor, E2E_TIMEOUT_MS } from "#cli/test-support/cli-process.js";
import { aChoice, bannerFixture, postLog } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { eventually, WebhookReceiver } from "#test/support/webhook-receiver.js";

const SECRET_FORMAT = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** `consentctl webhooks` against a real daemon delivering to a real receiver on 127.0.0.1. */
describe("consentctl webhooks (against a real daemon)", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let receiver: WebhookReceiver;
  let cli: ReturnType<typeof cliFor>;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    service = await startTestService({
      gateway: true,
      env: { CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" },
    });
    cli = cliFor(service);
  });
  afterAll(async () => {
    await service.close();
    await receiver.stop();
  });

  /** A team with a banner, and one endpoint at the receiver added through the CLI. */
  async function subscribed() {
    const fixture = await bannerFixture(service);
    const created = await cli.json(
      argv`webhooks add --team ${fixture.teamId} --url ${`${receiver.url}?team=${fixture.teamId}`}
        --banners ${fixture.publicId} --description crm`,
    );
    return { ...fixture, webhook: created };
  }

  it("adds an endpoint, prints its whsec_ secret once, then lists and shows it without it", async () => {
    const team = await subscribed();
    expect(team.webhook).toMatchObject({
      url: `${receiver.url}?team=${team.teamId}`,
      eventTypes: ["consent.given"],
      bannerIds: [team.publicId],
      description: "crm",
      enabled: true,
      disabledReason: null,
    });
    expect(team.webhook.secret).toMatch(SECRET_FORMAT);

    const [{ webhooks }, shown] = await Promise.all([
      cli.json(argv`webhooks list --team ${team.teamId}`),
      cli.json(argv`webhooks show ${team.webhook.id} --team ${team.teamId}`),
    ]);
    expect(webhooks).toHaveLength(1);
    expect(webhooks[0]).toMatchObject({ id: team.webhook.id, enabled: true });
    expect(shown).toMatchObject({ id: team.webhook.id, enabled: true });
    expect(JSON.stringify([webhooks, shown])).not.toContain(team.webhook.secret);
    expect(shown).not.toHaveProperty("secret");
    expect(webhooks[0]).not.toHaveProperty("secret");

    const human = await cli.run(argv`webhooks add --team ${team.teamId} --url ${receiver.url}`);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(
      "It will not be shown again (the daemon keeps it sealed, to sign deliveries)",
    );
    expect(human.stdout).toMatch(/^whsec_\S+$/m);
  });

  it("prints an endpoint with the fields REST gives it, null where REST has null", async () => {
    const team = await subscribed();
    const rest = async () => {
      const response = await fetch(`${service.gatewayUrl}/api/v1/webhooks/${team.webhook.id}`, {
        headers: { authorization: `Bearer ${team.key}` },
      });
      expect(response.status).toBe(200);
      return (await response.json()).data.webhook;
    };
    // Times too, to the character: `.000Z` where a fraction is zero, as REST writes them.
    const show = () => cli.json(argv`webhooks show ${team.webhook.id} --team ${team.teamId}`);

    const fresh = await show();
    expect(fresh).toMatchObject({
      disabledReason: null,
      disabledAt: null,
      failingSince: null,
      previousSecretExpiresAt: null,
    });
    expect(fresh).toEqual(await rest());

    await cli.json(argv`webhooks update ${team.webhook.id} --team ${team.teamId} --rotate-secret`);
    await cli.json(argv`webhooks update ${team.webhook.id} --team ${team.teamId} --disable`);
    const [rotated, listed] = await Promise.all([
      show(),
      cli.json(argv`webhooks list --team ${team.teamId}`),
    ]);
    expect(rotated.previousSecretExpiresAt).toEqual(expect.any(String));
    expect(rotated.disabledReason).toEqual(expect.any(String));
    expect(rotated).toEqual(await rest());
    expect(listed.webhooks).toEqual([rotated]);
  });

  it("sends a signed test event that reaches the receiver, and exits 1 when it is refused", async () => {
    const team = await subscribed();
    const tested = await cli.json(argv`webhooks test ${team.webhook.id} --team ${team.teamId}`);
    expect(tested).toMatchObject({ success: true, statusCode: 200, error: "" });
    const arrived = receiver.received.find((r) => r.headers["webhook-id"] === tested.eventId);
    expect(arrived, "the test event at the receiver").toBeDefined();
    const verified = new Webhook(team.webhook.secret).verify(
      arrived?.body ?? "",
      arrived?.headers as Record<string, string>,
    );
    expect(verified).toMatchObject({ type: "webhook.test" });

    const previous = receiver.answer;
    receiver.answer = (request) =>
      request.body.includes('"webhook.test"') ? { status: 503 } : previous(request);
    try {
      const refused = await cli.run(
        argv`webhooks test ${team.webhook.id} --team ${team.teamId} --json`,
      );
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stdout)).toMatchObject({ success: false, statusCode: 503 });
    } finally {
      receiver.answer = previous;
    }
  });

  it("shows a 410 Gone endpoint as disabled with its reason, lists the dead letter and replays it", async () => {
    const team = await subscribed();
    const previous = receiver.answer;
    receiver.answer = (request) =>
      request.body.includes(team.publicId) ? { status: 410 } : previous(request);
    await postLog(service, aChoice(team.publicId));
    const disabled = await eventually(async () => {
      const shown = await cli.json(argv`webhooks show ${team.webhook.id} --team ${team.teamId}`);
      return shown.enabled === false ? shown : undefined;
    }, "the endpoint is disabled");
    receiver.answer = previous;
    expect(disabled.disabledReason).toBe("the endpoint answered 410 Gone");
    const human = await cli.run(argv`webhooks list --team ${team.teamId}`);
    expect(human.stdout).toMatch(/ {2}disabled {2}the endpoint answered 410 Gone {2}/);

    const { deliveries } = await cli.json(
      argv`webhooks deliveries ${team.webhook.id} --team ${team.teamId} --status failed`,
    );
    expect(deliveries).toHaveLength(1);
    const [dead] = deliveries;
    expect(dead).toMatchObject({
      status: "failed",
      attempts: 1,
      lastStatusCode: 410,
      nextAttemptAt: null,
      succeededAt: null,
    });
    const none = await cli.json(
      argv`webhooks deliveries ${team.webhook.id} --team ${team.teamId} --status succeeded`,
    );
    expect(none.deliveries).toEqual([]);

    // Disabled, a replay would fail unsent at once: refused until the endpoint is enabled.
    const refused = await cli.fails(
      argv`webhooks replay ${team.webhook.id} ${dead.id} --team ${team.teamId}`,
    );
    expect([refused.code, refused.error]).toEqual([
      "failed_precondition",
      "The webhook is disabled; enable it before replaying its deliveries.",
    ]);
    const enabled = await cli.json(
      argv`webhooks update ${team.webhook.id} --team ${team.teamId} --enable`,
    );
    expect(enabled).toMatchObject({ enabled: true, disabledReason: null });
    const replayed = await cli.json(
      argv`webhooks replay ${team.webhook.id} ${dead.id} --team ${team.teamId}`,
    );
    expect(replayed).toEqual({ replayed: 1 });
    const resent = await eventually(
      () =>
        receiver.received.filter((r) => r.headers["webhook-id"] === dead.eventId).length === 2
          ? true
          : undefined,
      "the dead letter is sent again with the same webhook-id",
    );
    expect(resent).toBe(true);
    const delivered = await eventually(async () => {
      const page = await cli.json(
        argv`webhooks deliveries ${team.webhook.id} --team ${team.teamId} --status succeeded`,
      );
      return page.deliveries[0];
    }, "the replayed delivery is recorded as succeeded");
    expect(delivered).toMatchObject({ id: dead.id, eventId: dead.eventId });

    const since = await cli.json(
      argv`webhooks replay ${team.webhook.id} --team ${team.teamId} --failed-since 1h`,
    );
    expect(since).toEqual({ replayed: 0 });
  });

  it("updates the URL, banner filter and enabled state, rotates the secret with a grace period, and removes", async () => {
    const team = await subscribed();
    const disabled = await cli.json(
      argv`webhooks update ${team.webhook.id} --team ${team.teamId} --disable --all-banners
        --url ${`${receiver.url}?moved=${team.teamId}`} --description moved`,
    );
    expect(disabled).toMatchObject({
      enabled: false,
      bannerIds: [],
      url: `${receiver.url}?moved=${team.teamId}`,
      description: "moved",
    });
    expect(disabled).not.toHaveProperty("secret");

    const rotated = await cli.json(
      argv`webhooks update ${team.webhook.id} --team ${team.teamId} --rotate-secret --grace 24h`,
    );
    expect(rotated.secret).toMatch(SECRET_FORMAT);
    expect(rotated.secret).not.toBe(team.webhook.secret);
    const graceMs = Date.parse(rotated.previousSecretExpiresAt) - Date.now();
    expect(graceMs).toBeGreaterThan(23 * 3600_000);
    expect(graceMs).toBeLessThanOrEqual(24 * 3600_000);

    await cli.json(argv`webhooks update ${team.webhook.id} --team ${team.teamId} --enable`);
    const tested = await cli.json(argv`webhooks test ${team.webhook.id} --team ${team.teamId}`);
    const arrived = receiver.received.find((r) => r.headers["webhook-id"] === tested.eventId);
    const headers = arrived?.headers as Record<string, string>;
    // Both secrets sign during the grace period.
    expect(new Webhook(rotated.secret).verify(arrived?.body ?? "", headers)).toBeTruthy();
    expect(new Webhook(team.webhook.secret).verify(arrived?.body ?? "", headers)).toBeTruthy();

    // The terminal shows the daemon's answer: the new secret and until when the old one signs.
    const human = await cli.run(
      argv`webhooks update ${team.webhook.id} --team ${team.teamId} --rotate-secret --grace 2h`,
    );
    expect(human.code).toBe(0);
    expect(human.stdout).toContain("Secret rotated");
    expect(human.stdout).toMatch(/Old secret until/);
    expect(human.stdout).toMatch(/whsec_/);

    expect(await cli.json(argv`webhooks remove ${team.webhook.id} --team ${team.teamId}`)).toEqual({
      id: team.webhook.id,
      deleted: true,
    });
    const gone = await cli.fails(argv`webhooks show ${team.webhook.id} --team ${team.teamId}`);
    expect(gone).toMatchObject({
      code: "not_found",
      hint: expect.stringContaining("webhooks list"),
    });
  });

  it("exits 1 with the daemon's details for a refused URL or an unknown team", async () => {
    const team = await subscribed();
    const [internal, unknownTeam] = await Promise.all([
      cli.fails(argv`webhooks add --team ${team.teamId} --url http://10.0.0.1/hooks`),
      cli.fails(argv`webhooks list --team no-such-team`),
    ]);
    expect(internal.details?.[0]).toMatchObject({ field: "url" });
    expect(unknownTeam).toMatchObject({
      code: "not_found",
      hint: expect.stringContaining("teams list"),
    });
  });

  // Regression: the banner's own id (what `banners` commands take) was refused as "bannerIds[0]
  // is not a banner of this team", with no word of the public id --banners takes.
  it("names the banner's public id when --banners is given its own id, on add and update", async () => {
    const team = await subscribed();
    const expected = {
      code: "invalid_argument",
      error: `${team.id} is the id of banner "Shop"; --banners takes its public id, ${team.publicId}.`,
    };
    const [added, updated] = await Promise.all([
      cli.fails(
        argv`webhooks add --team ${team.teamId} --url https://hooks.example.com/c --banners ${`${team.publicId},${team.id.toUpperCase()}`}`,
      ),
      cli.fails(
        argv`webhooks update ${team.webhook.id} --team ${team.teamId} --banners ${team.id}`,
      ),
    ]);
    expect(added).toEqual({
      ...expected,
      error: expected.error.replace(team.id, team.id.toUpperCase()),
    });
    expect(updated).toEqual(expected);
    const human = await cli.run(
      argv`webhooks add --team ${team.teamId} --url https://hooks.example.com/c --banners ${team.id}`,
    );
    expect([human.code, human.stdout]).toEqual([1, ""]);
    expect(human.stderr).toContain(`--banners takes its public id, ${team.publicId}.`);
    // Nothing was added, nor changed; a value that is neither id is still the daemon's to refuse.
    const { webhooks } = await cli.json(argv`webhooks list --team ${team.teamId}`);
    expect(webhooks).toEqual([expect.objectContaining({ bannerIds: [team.publicId] })]);
    const unknown = await cli.fails(
      argv`webhooks add --team ${team.teamId} --url https://hooks.example.com/c --banners ${crypto.randomUUID()}`,
    );
    expect(unknown.details).toEqual([
      { field: "bannerIds[0]", message: "bannerIds[0] is not a banner of this team" },
    ]);
  });

  it("exits 2 for a wrong command line before calling the daemon", async () => {
    const results = await Promise.all([
      cli.run(argv`webhooks update some-id --team t`),
      cli.run(argv`webhooks update some-id --team t --rotate-secret --grace soon`),
      cli.run(argv`webhooks update some-id --team t --enable --disable`),
      cli.run(argv`webhooks update some-id --team t --grace 24h`),
      cli.run(argv`webhooks replay some-id --team t`),
      cli.run(argv`webhooks replay some-id d-id --team t --failed-since 24h`),
      cli.run(argv`webhooks replay some-id --team t --failed-since yesterday`),
      cli.run(argv`webhooks deliveries some-id --team t --status lost`),
      cli.run(argv`webhooks add --url https://example.com/hooks`),
      cli.run(argv`webhooks update some-id --team t --rotate-secret --grace 8d`),
    ]);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
    }
    expect(results[0]?.stderr).toBe(
      "error: nothing to update: pass at least one option\n(run the command with --help for usage)\n",
    );
    expect(results[1]?.stderr).toContain("use a number with a unit");
    expect(results[9]?.stderr).toContain(
      `option '--grace <duration>' argument '8d' is invalid. "8d" is out of range: from 0 to 7d.`,
    );
    expect(results[2]?.stderr).toContain("cannot be used with");
    expect(results[3]?.stderr).toContain("only with --rotate-secret");
    expect(results[4]?.stderr).toContain("one delivery id or pass --failed-since");
    expect(results[5]?.stderr).toContain("not both");
    expect(results[6]?.stderr).toContain("neither a date-time");
    expect(results[7]?.stderr).toContain("Allowed choices are pending, succeeded, failed");
    expect(results[8]?.stderr).toContain("required option '--team <id>'");
  });
});
