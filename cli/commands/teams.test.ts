import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cliFor,
  E2E_TIMEOUT_MS,
  runCli,
  runCliFromSources,
  startHttp1Server,
} from "#cli/test-support/cli-process.js";
import { runCliOnTerminal } from "#cli/test-support/pseudo-terminal.js";
import { rawServer } from "#test/support/raw-http2.js";
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

  it("logs each call under --debug and nothing of the connection's normal close", async () => {
    const run = await cli.run(["teams", "list", "--json", "--debug"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/ListTeams ok in \d+ ms/);
    expect(run.stderr).not.toContain("session failed");
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

  // Regression: at 80 columns the table was squeezed to `professi…` and `2026-11-…`.
  it("lists teams as blocks on an 80-column terminal and as a table on a 120-column one, nothing cut", async () => {
    await cli.json(["teams", "create", "--name", "Professional team", "--plan", "professional"]);
    const list = async (columns: number) => {
      const { code, screen } = await runCliOnTerminal(
        ["teams", "list", "--daemon", service.daemonUrl, "--token", service.operatorToken],
        {},
        { columns },
      );
      expect(code).toBe(0);
      // What is left once the spinner's line is erased.
      const lines = stripVTControlCharacters(screen).split(/\r?\n/);
      return lines.filter((line) => !line.includes("Listing teams…"));
    };
    const narrow = await list(80);
    expect(narrow).toContain("PLAN          professional");
    expect(narrow.some((line) => /^CREATED {7}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/.test(line))).toBe(
      true,
    );
    expect(narrow.join("\n")).not.toContain("…");
    const wide = await list(120);
    expect(wide.some((line) => /^ID {36}NAME +PLAN +CROSS-DEVICE +CREATED$/.test(line))).toBe(true);
    expect(
      wide.some((line) => /Professional team {2,}professional {2,}yes {2,}\d{4}-/.test(line)),
    ).toBe(true);
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

  // Regression: team-scoped commands said invalid_key (the daemon reads a refused token there as
  // an API key), admin commands unauthorized; one mistake now has one code.
  it("gives a refused operator token the code unauthorized, whatever the command", async () => {
    const wrong = ["--daemon", service.daemonUrl, "--token", "wrong", "--json"];
    const results = await Promise.all(
      [
        ["keys", "list", "--team", teamId],
        ["banners", "list", "--team", teamId],
        ["logs", "list", "--team", teamId],
        ["webhooks", "list", "--team", teamId],
        ["subjects", "resolve", "--team", teamId, "--banner", "P", "--subject", "x"],
      ].map((args) => runCli([...args, ...wrong])),
    );
    for (const result of results) {
      expect(result.code).toBe(1);
      expect(result.stdout).toBe("");
      expect(JSON.parse(result.stderr)).toMatchObject({
        error: "The daemon did not accept the operator token.",
        code: "unauthorized",
      });
    }
  });

  // Regression: pointed at an HTTP/1.1 port (the REST gateway's), the CLI said nothing answered,
  // told the operator to start the daemon, then crashed on an unhandled 'error' of the HTTP/2
  // session (ERR_HTTP2_ERROR), after the JSON error.
  it("says that an address answering HTTP/1.1 is not the daemon's h2c port, and ends cleanly", async () => {
    const other = await startHttp1Server();
    try {
      const at = ["--daemon", other.url, "--token", "x"];
      const [json, human, tail] = await Promise.all([
        runCli(["teams", "list", ...at, "--json"]),
        runCli(["teams", "list", ...at]),
        runCli(["logs", "tail", "--team", teamId, ...at, "--json"]),
      ]);
      const expected = {
        error: `Something answered at ${other.url}, but it is not the daemon's gRPC (h2c) port.`,
        code: "not_daemon",
        hint: expect.stringContaining("CONSENT_GRPC_PORT"),
      };
      for (const result of [json, tail]) {
        expect(result.code).toBe(1);
        expect(result.stdout).toBe("");
        expect(JSON.parse(result.stderr)).toEqual(expected);
      }
      console.log("HUMAN", JSON.stringify(human.stderr));
      expect(human.code).toBe(1);
      expect(human.stderr).toBe(
        `✖ Something answered at ${other.url}, but it is not the daemon's gRPC (h2c) port.\n` +
          "hint: point --daemon or CONSENT_DAEMON_URL at the daemon's gRPC port (CONSENT_GRPC_PORT, default 50051), not the REST gateway's (CONSENT_HTTP_PORT)\n",
      );
    } finally {
      await other.close();
    }
  });

  it("says that a daemon of an earlier release does not serve a call, naming it, not that the daemon failed", async () => {
    // The daemon's port as a release without AdminService answers: UNIMPLEMENTED, with its words.
    const earlier = await rawServer((stream, headers) =>
      stream.respond(
        {
          ":status": 200,
          "content-type": "application/grpc",
          "grpc-status": "12",
          "grpc-message": `unknown service ${String(headers[":path"]).split("/")[1]}`,
        },
        { endStream: true },
      ),
    );
    const { url } = earlier;
    try {
      const [json, human] = await Promise.all([
        runCli(["teams", "list", "--daemon", url, "--token", "x", "--json"]),
        runCli(["teams", "list", "--daemon", url, "--token", "x"]),
      ]);
      expect([json.code, json.stdout, JSON.parse(json.stderr)]).toEqual([
        1,
        "",
        {
          error: `The daemon at ${url} does not serve this call: unknown service consent.v1.AdminService.`,
          code: "unimplemented",
          hint: "it is of an earlier release than this consentctl (consentctl --version names this one): upgrade consentd, or use the consentctl of its release",
        },
      ]);
      expect([human.code, human.stdout, human.stderr]).toEqual([
        1,
        "",
        `✖ The daemon at ${url} does not serve this call: unknown service consent.v1.AdminService.\n` +
          "hint: it is of an earlier release than this consentctl (consentctl --version names this one): upgrade consentd, or use the consentctl of its release\n",
      ]);
    } finally {
      await earlier.close();
    }
  });

  // Regression: OpenSSL's "ssl3_get_record:wrong version number" was shown as the daemon failing.
  it("says that the daemon speaks no TLS when given an https:// URL, naming the http:// one", async () => {
    const https = service.daemonUrl.replace(/^http:/, "https:");
    const result = await runCli(["teams", "list", "--daemon", https, "--token", "x", "--json"]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(JSON.parse(result.stderr)).toEqual({
      error: `${https} does not speak TLS (the daemon serves h2c, without it).`,
      code: "tls_unavailable",
      hint: `use ${service.daemonUrl}, or the https:// address of a TLS proxy in front of the daemon`,
    });
  });

  // Regression: "The daemon failed: self-signed certificate." (an internal error, a bug).
  it("says which TLS certificate it does not accept and how to trust a private CA", async () => {
    const tls = path.join(import.meta.dirname, "../../test/support/tls");
    const server = http2.createSecureServer({
      key: await readFile(path.join(tls, "self-signed.key")),
      cert: await readFile(path.join(tls, "self-signed.crt")),
    });
    server.on("stream", (stream) => stream.respond({ ":status": 404 }, { endStream: true }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const result = await runCli(["teams", "list", "--daemon", url, "--token", "x", "--json"]);
      expect(result.code).toBe(1);
      expect(JSON.parse(result.stderr)).toEqual({
        error: `The TLS certificate at ${url} is not accepted: self-signed certificate.`,
        code: "tls_certificate",
        hint: "a certificate from a private CA needs that CA's certificate in NODE_EXTRA_CA_CERTS (a PEM file); it must also name the URL's host and be in date",
      });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  // Regression: "No team with id." from the daemon for an id that was an unset variable.
  it("exits 2 for an empty team id before calling the daemon", async () => {
    const [json, human] = await Promise.all([
      runCli(["teams", "show", "", "--daemon", "http://127.0.0.1:9", "--token", "x", "--json"]),
      runCli(["teams", "set-plan", "", "business", "--daemon", "http://127.0.0.1:9"]),
    ]);
    expect(json.code).toBe(2);
    expect(json.stdout).toBe("");
    expect(JSON.parse(json.stderr)).toEqual({
      error:
        "command-argument value '' is invalid for argument 'id'. the team id is empty (is the variable it came from set?).",
      code: "usage",
    });
    expect(human.code).toBe(2);
    expect(human.stderr).toContain("the team id is empty");
  });

  // Regression: "No team with id <a valid-looking id>." for an id pasted with a stray character.
  it("exits 2 for an id pasted with a sentence's full stop or a carriage return, naming the mistake", async () => {
    const id = "0b3c2f7e-4d1a-4a8e-9f00-1234567890ab";
    const [dot, carriageReturn, teamOption] = await Promise.all([
      runCli(["teams", "show", `${id}.`, "--daemon", "http://127.0.0.1:9", "--json"]),
      runCli(["teams", "show", `${id}\r`, "--daemon", "http://127.0.0.1:9", "--json"]),
      runCli(["banners", "list", "--team", `${id}.`, "--daemon", "http://127.0.0.1:9", "--json"]),
    ]);
    expect([dot.code, carriageReturn.code, teamOption.code]).toEqual([2, 2, 2]);
    expect(JSON.parse(teamOption.stderr).error).toContain(`ends with "."`);
    expect(JSON.parse(dot.stderr).error).toContain(
      `the team id "${id}." ends with ".", which no id has (copied with a sentence's punctuation?).`,
    );
    expect(JSON.parse(carriageReturn.stderr).error).toContain(
      "the team id holds a space, a control character or a non-ASCII character, which no token or id has.",
    );
  });

  // Regression: run through tsx (no bundle) from outside the package, tsx found no tsconfig.json
  // and compiled JSX for a global React: every view and error failed with "React is not
  // defined", and `sessions create` lost the token it had minted.
  it("runs from its sources through tsx from any directory, views and errors alike", async () => {
    const elsewhere = await mkdtemp(path.join(tmpdir(), "consentctl-cwd-"));
    try {
      const connection = ["--daemon", service.daemonUrl, "--token", service.operatorToken];
      const [shown, missing] = await Promise.all([
        runCliFromSources(["teams", "show", teamId, ...connection], { cwd: elsewhere }),
        runCliFromSources(["teams", "show", "no-such-team", ...connection], { cwd: elsewhere }),
      ]);
      expect(shown.stderr).toBe("");
      expect(shown.code).toBe(0);
      expect(shown.stdout).toContain(teamId);
      expect(missing.stdout).toBe("");
      expect(missing.stderr).toBe(
        "✖ No team with id no-such-team.\nhint: list the teams and their ids with `consentctl teams list`\n",
      );
      expect(missing.code).toBe(1);
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
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

  // Regression: a directory in the token file's place was "Cannot read the operator token at F:
  // cannot read F: it is a directory, where the file belongs; move it away." (the daemon's words
  // for its log after the CLI's), and an empty file "No operator token found", looked for at F.
  it("says why the token file cannot be used: a directory in its place, or an empty file", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "consentctl-token-file-"));
    try {
      const [directory, empty] = [path.join(root, "directory"), path.join(root, "empty")];
      await mkdir(path.join(directory, "admin-token"), { recursive: true });
      await mkdir(empty);
      await writeFile(path.join(empty, "admin-token"), "\n");
      const run = (dataDir: string, json: string[] = []) =>
        runCli(["teams", "list", ...json], {
          env: { CONSENT_DATA_DIR: dataDir, CONSENT_DAEMON_URL: service.daemonUrl },
        });
      const [inPlace, emptied, emptiedJson] = await Promise.all([
        run(directory),
        run(empty),
        run(empty, ["--json"]),
      ]);
      const hint =
        "hint: point CONSENT_DATA_DIR at the daemon's data directory, or pass --token / set CONSENT_ADMIN_TOKEN\n";
      expect(inPlace).toEqual({
        code: 1,
        stdout: "",
        stderr: `✖ Cannot read the operator token at ${path.join(directory, "admin-token")}: it is a directory.\n${hint}`,
      });
      expect(emptied).toEqual({
        code: 1,
        stdout: "",
        stderr: `✖ The operator token file ${path.join(empty, "admin-token")} is empty.\n${hint}`,
      });
      expect(JSON.parse(emptiedJson.stderr)).toMatchObject({ code: "token_unreadable" });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
