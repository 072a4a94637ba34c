import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { afterEach, describe, expect, it } from "vitest";
import { main } from "#cli/main.js";
import { createProgram } from "#cli/program.js";
import { memoryIo } from "#cli/test-support/memory-io.js";

/** Every command and group, the program ([]) first, as its path of names. */
function allCommands(command: Command, prefix: string[] = []): string[][] {
  return [prefix, ...command.commands.flatMap((sub) => allCommands(sub, [...prefix, sub.name()]))];
}

/** Every runnable command, as its path of names ("keys rotate"). */
function leafCommands(command: Command, prefix: string[] = []): string[][] {
  return command.commands.flatMap((sub) => {
    const path = [...prefix, sub.name()];
    return sub.commands.length > 0 ? leafCommands(sub, path) : [path];
  });
}

async function run(...args: string[]) {
  const io = memoryIo();
  const code = await main(["node", "consentctl", ...args], io);
  return { code, stdout: io.stdout.text, stderr: io.stderr.text };
}

describe("consentctl command line", () => {
  afterEach(() => {
    process.exitCode = undefined;
  });

  it("has every command the operator CLI promises", () => {
    const names = leafCommands(createProgram(memoryIo(), { exitCode: 0 }, false)).map((p) =>
      p.join(" "),
    );
    // Containment, not equality: other command groups (webhooks) register beside these.
    expect(names).toEqual(
      expect.arrayContaining([
        "teams create",
        "teams list",
        "teams show",
        "teams set-plan",
        "keys create",
        "keys list",
        "keys revoke",
        "keys rotate",
        "sessions create",
        "sessions list",
        "sessions revoke",
        "banners list",
        "banners show",
        "banners create",
        "banners update",
        "banners publish",
        "banners activate",
        "banners deactivate",
        "subjects resolve",
        "subjects delete",
        "logs list",
        "logs tail",
        "logs stats",
        "logs export",
        "webhooks add",
        "webhooks list",
        "webhooks show",
        "webhooks update",
        "webhooks remove",
        "webhooks test",
        "webhooks deliveries",
        "webhooks replay",
        "health",
        "doctor",
      ]),
    );
  });

  it("describes every command and group", () => {
    const visit = (command: Command, path: string): void => {
      for (const sub of command.commands) {
        const name = `${path} ${sub.name()}`.trim();
        expect(sub.description().length, name).toBeGreaterThan(10);
        visit(sub, name);
      }
    };
    visit(createProgram(memoryIo(), { exitCode: 0 }, false), "");
  });

  it("gives every command a description and an example in --help, exit 0", async () => {
    const program = createProgram(memoryIo(), { exitCode: 0 }, false);
    for (const path of leafCommands(program)) {
      const help = await run(...path, "--help");
      expect(help.code, path.join(" ")).toBe(0);
      expect(help.stderr).toBe("");
      expect(help.stdout, path.join(" ")).toMatch(/^Usage: consentctl /);
      expect(help.stdout, path.join(" ")).toContain(`Examples:\n  $ `);
      expect(help.stdout).toContain(`consentctl ${path.join(" ")}`);
    }
  });

  it("points --config of banners create and update to the configuration reference", async () => {
    const reference = "docs/banner-configuration.md";
    await readFile(new URL(`../${reference}`, import.meta.url), "utf8");
    for (const command of ["create", "update"]) {
      expect((await run("banners", command, "--help")).stdout).toContain(reference);
    }
  });

  // Regression: `keys create --help` showed --expires-at 2026-12-31T23:59:59Z, which the daemon
  // refuses ("must be in the future") from 2027 on.
  it("gives --expires-at, which must lie ahead, far-off dates in help and in its messages", async () => {
    const farOff = (text: string) => {
      const dates = [...text.matchAll(/(?:--expires-at |e\.g\. )(\d{4}-\d{2}-\d{2}T[\d:]+Z)/g)];
      expect(dates.length, text).toBeGreaterThan(0);
      for (const [, date = ""] of dates) expect(date >= "2090", date).toBe(true);
    };
    farOff((await run("keys", "create", "--help")).stdout);
    const refused = await run(
      ...["keys", "create", "--team", "TEAM_ID", "--env", "live", "--scopes", "banners:read"],
      ...["--expires-at", "2027-02-30T00:00:00Z"],
    );
    expect(refused.code).toBe(2);
    farOff(refused.stderr);
  });

  it("lists the global options in the top-level help", async () => {
    const help = await run("--help");
    expect(help.code).toBe(0);
    for (const option of ["--daemon <url>", "--token <token>", "--json", "--debug"]) {
      expect(help.stdout).toContain(option);
    }
    // --json names both streams that print JSON Lines, as the output contract does (cli/README.md).
    expect(help.stdout.replace(/\s+/g, " ")).toContain(
      "(JSON Lines for logs tail, and for logs export without --out)",
    );
  });

  it("exits 2 for an unknown command, a group without subcommand, or an extra argument", async () => {
    const results = await Promise.all([
      run("frobnicate"),
      run("teams"),
      run("teams", "show"),
      run("teams", "list", "extra"),
      run("health", "--daemon", "not a url"),
      run("teams", "list", "--token", ""),
    ]);
    for (const result of results) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr).not.toBe("");
    }
    expect(results[0]?.stderr).toContain("unknown command 'frobnicate'");
    expect(results[4]?.stderr).toContain("is not an absolute URL");
    // An empty --token (an unset variable) never falls back to another token.
    expect(results[5]?.stderr).toContain("the token is empty");
  });

  // Regression: an empty id or value (an unset variable) went to the daemon ("Operator calls
  // must name a team"), or `backup --to ""` meant the working directory.
  it("exits 2 for an empty id or value, as the empty --token does, naming what is empty", async () => {
    const cases: [string[], string][] = [
      [["keys", "list", "--team", ""], "the team id is empty"],
      [["keys", "revoke", ""], "the key id is empty"],
      [["sessions", "revoke", " "], "the session id is empty"],
      [["banners", "show", "", "--team", "t"], "the banner id is empty"],
      [
        ["banners", "create", "--team", "t", "--name", "n", "--domain", "d.com", "--config", ""],
        "the configuration file is empty",
      ],
      [
        ["subjects", "resolve", "--team", "t", "--banner", "", "--subject", "x"],
        "the banner's public id is empty",
      ],
      [
        ["subjects", "delete", "--team", "t", "--banner", "P", "--subject", ""],
        "the subject id is empty",
      ],
      [["logs", "export", "--team", "t", "--out", ""], "the output file is empty"],
      [["logs", "list", "--team", "t", "--banner", ""], "the banner's public id is empty"],
      [["webhooks", "show", "", "--team", "t"], "the endpoint id is empty"],
      [["webhooks", "replay", "w", "", "--team", "t"], "the delivery id is empty"],
      [["backup", "--to", ""], "the backup directory is empty"],
    ];
    const results = await Promise.all(cases.map(([args]) => run(...args)));
    for (const [index, result] of results.entries()) {
      const [args, words] = cases[index] as [string[], string];
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stdout).toBe("");
      expect(result.stderr, args.join(" ")).toContain(
        `${words} (is the variable it came from set?)`,
      );
    }
  });

  it("prints the package's version for --version and -V, as { version } with --json", async () => {
    const { version } = JSON.parse(
      await readFile(new URL("../package.json", import.meta.url), "utf8"),
    );
    for (const flag of ["--version", "-V"]) {
      expect(await run(flag)).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
    }
    const json = await run("--version", "--json");
    expect(json.code).toBe(0);
    expect(json.stderr).toBe("");
    expect(JSON.parse(json.stdout)).toEqual({ version });
  });

  // Regression: `help teams create` showed the teams group's help, and `help` exited 2.
  it("shows a command's own help for help GROUP COMMAND, exit 0, as --help does", async () => {
    const pairs: [string[], string[]][] = [
      [
        ["help", "teams", "create"],
        ["teams", "create", "--help"],
      ],
      [
        ["help", "webhooks", "replay"],
        ["webhooks", "replay", "--help"],
      ],
      [
        ["help", "teams"],
        ["teams", "--help"],
      ],
      [["help"], ["--help"]],
      [
        ["teams", "help", "create"],
        ["teams", "create", "--help"],
      ],
    ];
    for (const [asked, flag] of pairs) {
      const [help, expected] = await Promise.all([run(...asked), run(...flag)]);
      expect(help, asked.join(" ")).toEqual({ code: 0, stdout: expected.stdout, stderr: "" });
      expect(help.stdout).toMatch(new RegExp(`^Usage: consentctl ${flag.slice(0, -1).join(" ")}`));
    }
    const unknown = await run("help", "teams", "nope");
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain("unknown command 'teams nope'");
  });

  // Regression: `teams help help` printed the teams group's help on stderr, exit 2, and
  // `help teams help` was an unknown command.
  it("shows each group's help command its own help for GROUP help help, exit 0, as help help does", async () => {
    const program = createProgram(memoryIo(), { exitCode: 0 }, false);
    const groups = program.commands.filter((group) => group.commands.length > 0);
    expect(groups.map((group) => group.name())).toEqual(
      expect.arrayContaining([
        "teams",
        "keys",
        "sessions",
        "banners",
        "subjects",
        "logs",
        "webhooks",
      ]),
    );
    for (const group of groups.map((g) => g.name())) {
      const [help, json, fromTop] = await Promise.all([
        run(group, "help", "help"),
        run(group, "help", "help", "--json"),
        run("help", group, "help"),
      ]);
      expect(help, group).toEqual({
        code: 0,
        stdout: `Usage: consentctl ${group} help [command]\n\ndisplay help for command\n`,
        stderr: "",
      });
      expect(json, group).toEqual(help);
      expect(fromTop, group).toEqual(help);
      // The group's help lists the help command as before.
      expect((await run(group, "--help")).stdout).toMatch(
        /\n {2}help \[command\] +display help for command\n/,
      );
    }
    const top = await run("help", "help");
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^Usage: consentctl help \[options\] \[command\.\.\.\]/);
  });

  // Regression: `teams nope --help` printed the teams group's help, exit 0, as if the command
  // existed; `teams help nope --json` said the group "needs a command".
  it("exits 2 for an unknown command even with --help or after help, as without them", async () => {
    const lines: [string[], string][] = [
      [["teams", "nope", "--help"], "nope"],
      [["teams", "nope", "-h"], "nope"],
      [["teams", "help", "nope"], "nope"],
      [["teams", "lst", "--help"], "lst"],
      [["teams", "help", "lst"], "lst"],
      [["nope", "--help"], "nope"],
      [["--daemon", "http://127.0.0.1:1", "webhooks", "nope", "--help"], "nope"],
    ];
    for (const [args, name] of lines) {
      // The words of the unknown command alone (`teams nope`), commander's suggestion included.
      const alone = args.slice(0, args.indexOf(name) + 1).filter((arg) => arg !== "help");
      const [human, json, expected, expectedJson] = await Promise.all([
        run(...args),
        run(...args, "--json"),
        run(...alone),
        run(...alone, "--json"),
      ]);
      expect(human, args.join(" ")).toEqual({ ...expected, code: 2, stdout: "" });
      expect(human.stderr).toMatch(new RegExp(`^error: unknown command '${name}'\n`));
      expect(json, args.join(" ")).toEqual({ ...expectedJson, code: 2, stdout: "" });
      expect(JSON.parse(json.stderr)).toEqual({
        error: expect.stringMatching(new RegExp(`^unknown command '${name}'`)),
        code: "usage",
      });
    }
    expect((await run("teams", "help", "lst")).stderr).toContain("(Did you mean list?)");
    // Help of commands that exist is unchanged: on stdout, exit 0.
    for (const args of [
      ["teams", "--help"],
      ["teams", "help"],
      ["teams", "help", "create"],
      ["teams", "list", "--help"],
      ["help", "teams"],
    ]) {
      const help = await run(...args, "--json");
      expect([help.code, help.stderr], args.join(" ")).toEqual([0, ""]);
      expect(help.stdout).toMatch(/^Usage: consentctl teams/);
    }
  });

  // Regression: `consentctl --json` and `consentctl teams --json` printed the help as text.
  it("with --json, reports a missing command as a JSON usage error; without, shows the help", async () => {
    const [program, group, plain] = await Promise.all([
      run("--json"),
      run("teams", "--json"),
      run("teams"),
    ]);
    for (const result of [program, group, plain]) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
    }
    expect(JSON.parse(group.stderr)).toEqual({
      error: "consentctl teams needs a command: create, list, show, set-plan",
      code: "usage",
      hint: "run `consentctl teams --help` for usage",
    });
    expect(JSON.parse(program.stderr)).toMatchObject({
      error: expect.stringMatching(/^consentctl needs a command: teams, keys, .*, backup$/),
      code: "usage",
      hint: "run `consentctl --help` for usage",
    });
    expect(plain.stderr).toMatch(/^Usage: consentctl teams \[options\] \[command\]/);
  });

  // Regression: the webhooks group's help came out in lines of up to 150 characters.
  it("wraps every help to 80 columns but the examples, which are copied whole", async () => {
    const program = createProgram(memoryIo(), { exitCode: 0 }, false);
    for (const path of allCommands(program)) {
      const { stdout } = await run(...path, "--help");
      const long = stdout
        .split("\n")
        .filter((line) => line.length > 80 && !line.startsWith("  $ "));
      expect(long, path.join(" ") || "consentctl").toEqual([]);
    }
  });

  it("prints usage errors as one JSON object on stderr with --json", async () => {
    const result = await run("teams", "show", "--json");
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(JSON.parse(result.stderr)).toEqual({
      error: "missing required argument 'id'",
      code: "usage",
    });
  });
});
