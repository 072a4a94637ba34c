import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliFor, E2E_TIMEOUT_MS, runCli } from "#cli/test-support/cli-process.js";
import { startTestService, type TestService } from "#test/support/service.js";

describe("consentctl teams (against a real daemon)", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;

  beforeAll(async () => {
    service = await startTestService();
    cli = cliFor(service);
    teamId = (await cli.json(["teams", "create", "--name", "Acme Ltd", "--plan", "starter"])).id;
  });
  afterAll(() => service.close());

  it("creates a team and prints it as one JSON object", async () => {
    const team = await cli.json(["teams", "create", "--name", "Beta", "--plan", "professional"]);
    expect(team).toMatchObject({ name: "Beta", plan: "professional", crossDeviceConsent: true });
    expect(team.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(team.createdAt).toMatch(/Z$/);
  });

  it("lists, shows and moves a team to another plan", async () => {
    const [list, shown, moved] = await Promise.all([
      cli.json(["teams", "list"]),
      cli.json(["teams", "show", teamId]),
      cli.json(["teams", "set-plan", teamId, "business"]),
    ]);
    expect(list.teams.map((t: { id: string }) => t.id)).toContain(teamId);
    expect(shown).toMatchObject({ id: teamId, name: "Acme Ltd" });
    expect(moved).toMatchObject({ id: teamId, plan: "business", crossDeviceConsent: true });
  });

  it("prints a human table on a pipe without cutting ids, and no escape codes", async () => {
    const result = await cli.run(["teams", "list"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^ID\s+NAME\s+PLAN/);
    expect(result.stdout).toContain(teamId);
    expect(result.stdout).not.toContain("\u001b");
    expect(result.stderr).toBe("");
  });

  it("exits 1 with the daemon's message for an unknown team, stdout empty", async () => {
    const [json, human] = await Promise.all([
      cli.fails(["teams", "show", "no-such-team"]),
      cli.run(["teams", "show", "no-such-team"]),
    ]);
    expect(json).toMatchObject({ code: "not_found", error: "No team with id no-such-team." });
    expect(json.hint).toContain("consentctl teams list");
    expect(human.code).toBe(1);
    expect(human.stdout).toBe("");
    expect(human.stderr).toContain("✖ No team with id no-such-team.");
    expect(human.stderr).toContain("hint: list the teams");
    expect(human.stderr).not.toMatch(/\bat .*\(.*:\d+:\d+\)/); // no stack trace without --debug
  });

  it("exits 2 for a plan that is none, naming the plans, before calling the daemon", async () => {
    const [created, moved] = await Promise.all([
      cli.run(["teams", "create", "--name", "X", "--plan", "gold"]),
      cli.run(["teams", "set-plan", teamId, "gold"]),
    ]);
    for (const result of [created, moved]) {
      expect([result.code, result.stdout]).toEqual([2, ""]);
      expect(result.stderr).toContain(
        "Allowed choices are free, starter, professional, business, enterprise.",
      );
    }
  });

  it("lists the daemon's validation details for a blank name", async () => {
    const error = await cli.fails(["teams", "create", "--name", " ", "--plan", "free"]);
    expect(error.code).toBe("invalid_request");
    expect(error.details).toEqual([{ field: "name", message: "name must not be blank" }]);
  });

  it("exits 2 for a missing required option, also as JSON with --json", async () => {
    const [human, json] = await Promise.all([
      cli.run(["teams", "create", "--name", "X"]),
      cli.run(["teams", "create", "--name", "X", "--json"]),
    ]);
    expect(human.code).toBe(2);
    expect(human.stdout).toBe("");
    expect(human.stderr).toContain("required option '--plan <plan>' not specified");
    expect(json.code).toBe(2);
    expect(json.stdout).toBe("");
    expect(JSON.parse(json.stderr)).toEqual({
      error: "required option '--plan <plan>' not specified",
      code: "usage",
    });
  });

  it("explains a refused token and an unreachable daemon, exit 1", async () => {
    const [badToken, unreachable] = await Promise.all([
      runCli(["teams", "list", "--daemon", service.daemonUrl, "--token", "wrong", "--json"]),
      runCli(["teams", "list", "--daemon", "http://127.0.0.1:9", "--token", "x", "--json"]),
    ]);
    expect(badToken.code).toBe(1);
    expect(JSON.parse(badToken.stderr)).toMatchObject({
      code: "unauthorized",
      hint: expect.stringContaining("--token"),
    });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stdout).toBe("");
    expect(JSON.parse(unreachable.stderr)).toMatchObject({
      code: "daemon_unreachable",
      error: "Cannot reach the daemon at http://127.0.0.1:9.",
      hint: expect.stringContaining("npm start"),
    });
  });

  it("finds the token in <CONSENT_DATA_DIR>/admin-token, and says where it looked when absent", async () => {
    const empty = await mkdtemp(path.join(tmpdir(), "consentctl-empty-"));
    try {
      const [fromFile, missing] = await Promise.all([
        runCli(["teams", "list", "--json"], {
          env: { CONSENT_DATA_DIR: service.dataDir, CONSENT_DAEMON_URL: service.daemonUrl },
        }),
        runCli(["teams", "list", "--json"], {
          env: { CONSENT_DATA_DIR: empty, CONSENT_DAEMON_URL: service.daemonUrl },
        }),
      ]);
      expect(fromFile.code).toBe(0);
      expect(JSON.parse(fromFile.stdout).teams.length).toBeGreaterThan(0);
      expect(missing.code).toBe(1);
      expect(JSON.parse(missing.stderr)).toMatchObject({
        code: "no_token",
        hint: expect.stringContaining(path.join(empty, "admin-token")),
      });
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
