import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  argv,
  type cliFor,
  E2E_TIMEOUT_MS,
  startServiceWithTeam,
} from "#cli/test-support/cli-process.js";
import type { TestService } from "#test/support/service.js";

const KEY_FORMAT = /^ck_(live|test)_[0-9A-Za-z]{38}$/;

describe.concurrent("consentctl keys (against a real daemon)", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;
  const mint = (...extra: string[]) =>
    cli.json([...argv`keys create --team ${teamId} --env live --scopes banners:read`, ...extra]);

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
      expiresAt: "2099-01-01T00:00:00Z",
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
  });

  it("exits 1 with the daemon's details for an unknown scope, a past expiry or an unknown key", async () => {
    const [scope, past, unknown, team] = await Promise.all([
      cli.fails(argv`keys create --team ${teamId} --env live --scopes banners:read,nope`),
      cli.fails(
        argv`keys create --team ${teamId} --env live --scopes banners:read
          --expires-at 2001-01-01T00:00:00Z`,
      ),
      cli.fails(argv`keys revoke no-such-key`),
      cli.fails(argv`keys list --team no-such-team`),
    ]);
    expect(scope.details?.[0]).toMatchObject({ field: "scopes[1]" });
    expect(past.details).toEqual([
      { field: "expiresAt", message: "expiresAt must be in the future" },
    ]);
    expect(unknown).toMatchObject({
      code: "not_found",
      hint: expect.stringContaining("keys list"),
    });
    expect(team).toMatchObject({ code: "not_found", hint: expect.stringContaining("teams list") });
  });

  it("exits 2 for a bad --env, --grace or --expires-at before calling the daemon", async () => {
    const results = await Promise.all([
      cli.run(argv`keys create --team ${teamId} --env prod --scopes banners:read`),
      cli.run(argv`keys rotate some-id --grace 10`),
      cli.run(argv`keys rotate some-id`),
      cli.run(
        argv`keys create --team ${teamId} --env live --scopes banners:read --expires-at tomorrow`,
      ),
    ]);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
    }
    expect(results[0]?.stderr).toContain("Allowed choices are live, test");
    expect(results[1]?.stderr).toContain("use a number with a unit");
    expect(results[2]?.stderr).toContain("required option '--grace <duration>'");
    expect(results[3]?.stderr).toContain("ISO 8601");
  });
});
