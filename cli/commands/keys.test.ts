import { randomBytes, randomUUID } from "node:crypto";
import { stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  argv,
  type cliFor,
  E2E_TIMEOUT_MS,
  startServiceWithTeam,
} from "#cli/test-support/cli-process.js";
import { runCliOnTerminal } from "#cli/test-support/pseudo-terminal.js";
import type { TestService } from "#test/support/service.js";

const KEY_FORMAT = /^ck_(live|test)_[0-9A-Za-z]{38}$/;

describe.concurrent("consentctl keys (against a real daemon)", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;
  const mintIn = (team: string, ...extra: string[]) =>
    cli.json([...argv`keys create --team ${team} --env live --scopes banners:read`, ...extra]);
  const mint = (...extra: string[]) => mintIn(teamId, ...extra);
  /** A team of its own, for a test that counts the team's keys while others mint concurrently. */
  const newTeam = async (name: string): Promise<string> =>
    (await cli.json(argv`teams create --name ${name} --plan starter`)).id;
  const keyCount = async (team: string): Promise<number> =>
    (await cli.json(argv`keys list --team ${team}`)).keys.length;

  beforeAll(async () => {
    ({ service, cli, teamId } = await startServiceWithTeam("starter"));
  });
  afterAll(() => service.close());

  it("mints a key and prints the full key once, under `key`", async () => {
    const created = await cli.json(
      argv`keys create --team ${teamId} --env test --scopes banners:read,consent:read
        --name ci --expires-at 2099-01-01T00:00:00Z`,
    );
    expect(created).toMatchObject({
      teamId,
      environment: "test",
      name: "ci",
      scopes: ["banners:read", "consent:read"],
      expiresAt: "2099-01-01T00:00:00.000Z",
    });
    expect(created.key).toMatch(KEY_FORMAT);
    expect(created.key.startsWith("ck_test_")).toBe(true);
    expect(created.hint.slice(-4)).toBe(created.key.slice(-4));

    const { keys } = await cli.json(argv`keys list --team ${teamId}`);
    const listed = keys.find((k: { id: string }) => k.id === created.id);
    expect(listed).toMatchObject({ id: created.id, hint: created.hint });
    expect(JSON.stringify(keys)).not.toContain(created.key);
  });

  it("warns in human mode that the key will not be shown again", async () => {
    const result = await cli.run(
      argv`keys create --team ${teamId} --env live --scopes banners:read`,
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("It will not be shown again");
    expect(result.stdout).toMatch(/^ck_live_[0-9A-Za-z]{38}$/m);
  });

  // Regression: on a 40-column terminal the key (46 characters) was broken over two lines.
  it("prints the new key whole on one line of a terminal narrower than it", async () => {
    const { code, screen } = await runCliOnTerminal(
      [
        ...argv`keys create --team ${teamId} --env live --scopes banners:read`,
        ...argv`--daemon ${service.daemonUrl} --token ${service.operatorToken}`,
      ],
      {},
      { columns: 40 },
    );
    expect(code).toBe(0);
    const lines = stripVTControlCharacters(screen).split("\r\n");
    expect(lines.filter((line) => line.startsWith("ck_live_"))).toEqual([
      expect.stringMatching(KEY_FORMAT),
    ]);
  });

  it("revokes a key", async () => {
    const { id } = await mint();
    const revoked = await cli.json(argv`keys revoke ${id}`);
    expect(revoked).toMatchObject({ id, revokedAt: expect.any(String) });
  });

  it("rotates a key with a grace period, or stops the old one at once with 0", async () => {
    const [first, second] = await Promise.all([mint("--name", "rotating"), mint()]);
    const [graced, immediate] = await Promise.all([
      cli.json(argv`keys rotate ${first.id} --grace 24h`),
      cli.json(argv`keys rotate ${second.id} --grace 0`),
    ]);
    expect(graced.key).toMatch(KEY_FORMAT);
    expect(graced).toMatchObject({ name: "rotating", scopes: ["banners:read"] });
    expect(graced.id).not.toBe(first.id);
    const graceMs = Date.parse(graced.previous.expiresAt) - Date.now();
    expect(graceMs).toBeGreaterThan(23 * 3600_000);
    expect(graceMs).toBeLessThanOrEqual(24 * 3600_000);
    expect(Date.parse(immediate.previous.expiresAt)).toBeLessThanOrEqual(Date.now());
    // The old keys name their replacement and the rotation's moment, which with no grace period
    // is their expiry (what keyStatus reads, whatever the operator's clock).
    expect(graced.previous).toMatchObject({ replacedBy: graced.id, replacedAt: graced.createdAt });
    // A key never rotated carries both fields as null (not an empty id).
    expect(graced).toMatchObject({ replacedBy: null, replacedAt: null });
    expect(immediate.previous).toMatchObject({
      replacedBy: immediate.id,
      replacedAt: immediate.previous.expiresAt,
    });
  });

  it("carries an operator-set expiry over to the replacement key", async () => {
    const dated = await mint("--expires-at", "2099-01-01T00:00:00Z");
    const rotated = await cli.json(argv`keys rotate ${dated.id} --grace 1h`);
    expect(rotated.expiresAt).toBe("2099-01-01T00:00:00.000Z");
    expect(Date.parse(rotated.previous.expiresAt)).toBeLessThanOrEqual(Date.now() + 3600_000);
  });

  // Regression: a second rotation of the same key gave the new key the first grace period's end
  // as expiry, and rotating an expired key minted an already-expired key and exited 0.
  it("refuses to rotate a key that is already rotated, expired or revoked, and mints nothing", async () => {
    const team = await newTeam("rotations");
    const [dated, stopped, revoked] = await Promise.all([
      mintIn(team, "--name", "dated", "--expires-at", "2099-01-01T00:00:00Z"),
      mintIn(team, "--name", "stopped"),
      mintIn(team, "--name", "revoked"),
    ]);
    // A key whose own expiry has passed, stored directly: the daemon refuses to mint one.
    const expiredAt = new Date(Date.now() - 60_000);
    const template = await service.store.keys.get(dated.id);
    const expired = {
      ...(template as NonNullable<typeof template>),
      id: randomUUID(),
      name: "expired",
      keyHash: randomBytes(32).toString("hex"),
      expiresAt: expiredAt,
    };
    await service.store.keys.insert(expired);
    const replacement = await cli.json(argv`keys rotate ${dated.id} --grace 24h`);
    await Promise.all([
      cli.json(argv`keys rotate ${stopped.id} --grace 0`),
      cli.json(argv`keys revoke ${revoked.id}`),
    ]);
    expect(await keyCount(team)).toBe(6);

    const [again, stoppedAgain, expiredKey, revokedKey, human] = await Promise.all([
      cli.fails(argv`keys rotate ${dated.id} --grace 24h`),
      cli.fails(argv`keys rotate ${stopped.id} --grace 24h`),
      cli.fails(argv`keys rotate ${expired.id} --grace 24h`),
      cli.fails(argv`keys rotate ${revoked.id} --grace 24h`),
      cli.run(argv`keys rotate ${dated.id} --grace 1h`),
    ]);
    expect(again).toMatchObject({
      code: "failed_precondition",
      error: expect.stringContaining(
        `API key ${dated.id} was already rotated: key ${replacement.id}`,
      ),
    });
    expect(again.error).toContain(
      `stops working at ${replacement.previous.expiresAt.slice(0, 19)}`,
    );
    expect(stoppedAgain).toMatchObject({
      code: "failed_precondition",
      error: expect.stringMatching(/was already rotated: .* it stopped working at/),
    });
    expect(expiredKey).toMatchObject({
      code: "failed_precondition",
      error: `API key ${expired.id} expired at ${expiredAt.toISOString()} and cannot be rotated; create a new key instead.`,
    });
    expect(revokedKey).toMatchObject({
      code: "failed_precondition",
      error: expect.stringContaining(`API key ${revoked.id} was revoked at`),
    });
    expect(human.code).toBe(1);
    expect(human.stdout).toBe("");
    expect(human.stderr).toContain(`rotate ${replacement.id} instead`);
    expect(human.stderr).not.toContain("keeps working until");
    expect(await keyCount(team)).toBe(6);
  });

  it("lets one of two simultaneous rotations of a key win, and leaves no other new key usable", async () => {
    const team = await newTeam("rotation race");
    const original = await mintIn(team, "--name", "raced");
    const outcomes = await Promise.all([
      cli.run(argv`keys rotate ${original.id} --grace 1h --json`),
      cli.run(argv`keys rotate ${original.id} --grace 1h --json`),
    ]);
    expect(outcomes.map((run) => run.code).sort()).toEqual([0, 1]);
    const refused = outcomes.find((run) => run.code === 1);
    expect(JSON.parse(refused?.stderr ?? "{}")).toMatchObject({ code: "failed_precondition" });
    const { keys } = await cli.json(argv`keys list --team ${team}`);
    const usable = keys.filter((key: { revokedAt: string | null }) => key.revokedAt === null);
    const winner = JSON.parse(outcomes.find((run) => run.code === 0)?.stdout ?? "{}");
    expect(usable.map((key: { id: string }) => key.id).sort()).toEqual(
      [original.id, winner.id].sort(),
    );
  });

  it("exits 1 with the daemon's details for a past expiry or an unknown key", async () => {
    const [past, unknown, team] = await Promise.all([
      cli.fails(
        argv`keys create --team ${teamId} --env live --scopes banners:read
          --expires-at 2001-01-01T00:00:00Z`,
      ),
      cli.fails(argv`keys revoke no-such-key`),
      cli.fails(argv`keys list --team no-such-team`),
    ]);
    expect(past.details).toEqual([
      { field: "expiresAt", message: "expiresAt must be in the future" },
    ]);
    expect(unknown).toMatchObject({
      code: "not_found",
      hint: expect.stringContaining("keys list"),
    });
    expect(team).toMatchObject({ code: "not_found", hint: expect.stringContaining("teams list") });
  });

  // Regression: `new Date` read these as 2027-03-02, 2027-05-01 and 2026-12-02 and stored that.
  it("exits 2 for an impossible --expires-at day or 24:00, and stores no key", async () => {
    const team = await newTeam("dates");
    const results = await Promise.all(
      ["2027-02-30T00:00:00Z", "2027-04-31T10:00:00+02:00", "2026-12-01T24:00:00Z"].map((at) =>
        cli.run(
          argv`keys create --team ${team} --env live --scopes banners:read --expires-at ${at}`,
        ),
      ),
    );
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).toContain(
        "is not an ISO 8601 date-time with a zone on a real calendar day",
      );
    }
    expect(await keyCount(team)).toBe(0);
  });

  // Regression: `keys revoke ck_live_…` sent the key and printed it back in "No API key with id
  // ck_live_…", secret and all.
  it("refuses a whole API key given as a key id, exit 2, printing no part of it", async () => {
    const minted = await mint();
    const secret = minted.key as string;
    const body = secret.slice("ck_live_".length, -6);
    const results = await Promise.all([
      cli.run(argv`keys revoke ${secret}`),
      cli.run(argv`keys revoke ${secret} --json`),
      cli.run(argv`keys rotate ${secret} --grace 0`),
      // Cut short: no longer a valid key, but still nearly all of its secret.
      cli.run(argv`keys revoke ${secret.slice(0, -3)}`),
    ]);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).not.toContain(body.slice(0, 8));
      expect(result.stderr).toContain(
        "that is an API key itself, not its id (it was not sent, nor is it printed here)",
      );
      expect(result.stderr).toContain("consentctl keys list --team TEAM_ID");
    }
    expect(JSON.parse(results[1]?.stderr ?? "")).toMatchObject({ code: "usage" });
    // Nothing reached the daemon: the key is neither revoked nor rotated.
    const { keys } = await cli.json(argv`keys list --team ${teamId}`);
    const listed = keys.find((key: { id: string }) => key.id === minted.id);
    expect(listed).toBeDefined();
    expect(listed).toMatchObject({
      revokedAt: null,
      expiresAt: null,
      replacedBy: null,
      replacedAt: null,
    });
  });

  it("exits 2 for a bad --env, --grace, --expires-at or --scopes before calling the daemon", async () => {
    const results = await Promise.all([
      cli.run(argv`keys create --team ${teamId} --env prod --scopes banners:read`),
      cli.run(argv`keys rotate some-id --grace 10`),
      cli.run(argv`keys rotate some-id`),
      cli.run(
        argv`keys create --team ${teamId} --env live --scopes banners:read --expires-at tomorrow`,
      ),
      cli.run(argv`keys rotate some-id --grace 91d`),
      cli.run(argv`keys create --team ${teamId} --env live --scopes banners:read,nope`),
    ]);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
    }
    expect(results[0]?.stderr).toContain("Allowed choices are live, test");
    expect(results[1]?.stderr).toContain("use a number with a unit");
    expect(results[4]?.stderr).toContain(`"91d" is out of range: from 0 to 90d.`);
    expect(results[2]?.stderr).toContain("required option '--grace <duration>'");
    expect(results[3]?.stderr).toContain("ISO 8601");
    expect(results[5]?.stderr).toContain("unknown scope nope; the scopes are banners:read,");
  });
});
