import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  argv,
  type cliFor,
  E2E_TIMEOUT_MS,
  startServiceWithTeam,
} from "#cli/test-support/cli-process.js";
import type { TestService } from "#test/support/service.js";

const HOUR = 3600_000;

describe.concurrent("consentctl sessions (against a real daemon)", {
  timeout: E2E_TIMEOUT_MS,
}, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;

  beforeAll(async () => {
    ({ service, cli, teamId } = await startServiceWithTeam("free"));
  });
  afterAll(() => service.close());

  it("creates a 12-hour session by default and a shorter one with --ttl, each with its token", async () => {
    const [standard, short] = await Promise.all([
      cli.json(argv`sessions create --team ${teamId}`),
      cli.json(argv`sessions create --team ${teamId} --ttl 2h`),
    ]);
    for (const session of [standard, short]) {
      expect(session).toMatchObject({
        teamId,
        id: expect.any(String),
        expiresAt: expect.any(String),
      });
      expect(session.token.length).toBeGreaterThan(20);
    }
    const lifetime = (s: { createdAt: string; expiresAt: string }) =>
      Date.parse(s.expiresAt) - Date.parse(s.createdAt);
    expect(lifetime(standard)).toBe(12 * HOUR);
    expect(lifetime(short)).toBe(2 * HOUR);
    expect(standard.token).not.toBe(short.token);
  });

  it("revokes a session", async () => {
    const { id } = await cli.json(argv`sessions create --team ${teamId}`);
    const revoked = await cli.json(argv`sessions revoke ${id}`);
    expect(revoked).toMatchObject({ id, revokedAt: expect.any(String) });
    expect(revoked.token).toBeUndefined();
  });

  it("refuses a session token or an API key where the session id belongs, sending and printing neither", async () => {
    const { id, token } = await cli.json(argv`sessions create --team ${teamId}`);
    const key = "ck_live_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123456789";
    for (const secret of [token, key, token.slice(0, -4)]) {
      for (const json of [[], ["--json"]]) {
        const result = await cli.run([...argv`sessions revoke ${secret}`, ...json]);
        expect(result.code).toBe(2);
        expect(result.stdout).toBe("");
        expect(result.stderr).not.toContain(secret.slice(3, 12));
        expect(result.stderr).toContain("(it was not sent, nor is it printed here)");
      }
    }
    // Not revoked: nothing reached the daemon.
    const { sessions } = await cli.json(argv`sessions list --team ${teamId}`);
    const listed = sessions.find((s: { id: string }) => s.id === id);
    expect(listed).toBeDefined();
    expect(listed.revokedAt).toBeNull();
  });

  it("lists the team's unexpired sessions newest first, revoked ones marked, never a token", async () => {
    // A team of its own: the other tests of this file mint sessions for the shared one at once.
    const team = (await cli.json(argv`teams create --name listed --plan free`)).id;
    expect(await cli.json(argv`sessions list --team ${team}`)).toEqual({ sessions: [] });
    const first = await cli.json(argv`sessions create --team ${team}`);
    const second = await cli.json(argv`sessions create --team ${team} --ttl 1h`);
    await cli.json(argv`sessions revoke ${first.id}`);
    const { sessions } = await cli.json(argv`sessions list --team ${team}`);
    expect(sessions.map((s: { id: string }) => s.id)).toEqual([second.id, first.id]);
    expect(sessions[0]).toEqual({
      id: second.id,
      teamId: team,
      createdAt: second.createdAt,
      expiresAt: second.expiresAt,
      revokedAt: null,
    });
    expect(sessions[1]).toMatchObject({ id: first.id, revokedAt: expect.any(String) });
    expect(JSON.stringify(sessions)).not.toContain(first.token);
    const table = await cli.run(argv`sessions list --team ${team}`);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`${second.id}\\s+active`));
    expect(table.stdout).toMatch(new RegExp(`${first.id}\\s+revoked`));
    const unknown = await cli.fails(argv`sessions list --team no-such-team`);
    expect(unknown.code).toBe("not_found");
  });

  it("exits 1 for an unknown team or session; 2 for a bad or out-of-range --ttl", async () => {
    const [team, session, usage, tooShort, tooLong] = await Promise.all([
      cli.fails(argv`sessions create --team no-such-team`),
      cli.fails(argv`sessions revoke no-such-session`),
      cli.run(argv`sessions create --team ${teamId} --ttl soon --json`),
      cli.run(argv`sessions create --team ${teamId} --ttl 10s --json`),
      cli.run(argv`sessions create --team ${teamId} --ttl 31d`),
    ]);
    expect(team.code).toBe("not_found");
    expect(session.code).toBe("not_found");
    expect(session.hint).toContain("consentctl sessions list --team TEAM_ID");
    for (const result of [usage, tooShort, tooLong]) {
      expect([result.code, result.stdout]).toEqual([2, ""]);
    }
    expect(JSON.parse(usage.stderr).code).toBe("usage");
    expect(JSON.parse(tooShort.stderr).error).toContain(
      `option '--ttl <duration>' argument '10s' is invalid. "10s" is out of range: from 1m to 30d.`,
    );
    expect(tooLong.stderr).toContain(`"31d" is out of range: from 1m to 30d.`);
  });
});
