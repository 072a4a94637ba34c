import { chmod, lstat, mkdir, readdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  argv,
  type CliProcess,
  type CliRun,
  cliFor,
  E2E_TIMEOUT_MS,
  startCli,
} from "#cli/test-support/cli-process.js";
import { startCliOnClosingTerminal } from "#cli/test-support/closing-terminal.js";
import { runCliOnTerminal, startCliOnTerminal } from "#cli/test-support/pseudo-terminal.js";
import { createBanner, createTeam, mintKey } from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import { DAEMON_URL, PROGRAMS, startProgram, useProgramRoot } from "#test/support/processes.js";
import { rawServer } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** A preload that sends SIGINT as bin/consentctl.js imports the CLI, before main() runs. */
const INTERRUPT_WHILE_LOADING = new URL(
  "../test-support/interrupt-while-loading.mjs",
  import.meta.url,
).pathname;

/**
 * How long a consentctl interrupted as it loads may take to end by itself: half a test's limit
 * (E2E_TIMEOUT_MS), so one that never ends is stopped and named before the test's limit. It loads
 * as any run does, beside the file's other tests' runs on two busy cores: 30 s was seen passed.
 */
const ENDS_BY_ITSELF_MS = E2E_TIMEOUT_MS / 2;

/**
 * How a started consentctl ended by itself within ENDS_BY_ITSELF_MS. One still running then is
 * stopped, and the test fails: nothing else was to end it.
 */
async function endedByItself(cli: CliProcess): Promise<CliRun> {
  const running = Symbol("running");
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    cli.ended,
    new Promise<typeof running>((resolve) => {
      timer = setTimeout(resolve, ENDS_BY_ITSELF_MS, running);
    }),
  ]).finally(() => clearTimeout(timer));
  if (ended !== running) return ended;
  await cli.interrupt();
  throw new Error(`consentctl was still running ${ENDS_BY_ITSELF_MS / 1000} s after the interrupt`);
}

describe.concurrent("consentctl logs (against a real daemon)", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;

  /**
   * A team with a banner on shop.example.com, in a fresh state for one test: made through the
   * admin RPC and the REST API, as consentctl's teams and banners tests check those commands, so
   * each test's consentctl runs are its logs commands.
   */
  async function teamWithBanner() {
    const teamId = await createTeam(service, "professional", "Logs team");
    const { key } = await mintKey(service, teamId);
    const banner = await createBanner(service, key, { name: "B", domain: "shop.example.com" });
    return { teamId, bannerId: banner.id, publicId: banner.publicId };
  }

  /** Records a choice as the banner runtime does: POST /api/consent/log through the gateway. */
  async function record(publicId: string, overrides: Record<string, unknown> = {}) {
    const posted = await postLog(service, aChoice(publicId, overrides));
    expect(posted.status).toBe(200);
    return posted.body.consentLogId as string;
  }

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    cli = cliFor(service);
  });
  afterAll(() => service.close());

  it("lists rows newest first with banner, method and time filters, and pages", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const other = await teamWithBanner();
    const ids = [];
    for (const method of ["accept_all", "consent_default", "consent_given", "accept_all"]) {
      ids.push(await record(publicId, { method }));
    }
    await record(other.publicId);
    const all = await cli.json(argv`logs list --team ${teamId}`);
    expect(all.entries.map((e: { consentLogId: string }) => e.consentLogId)).toEqual(
      ids.toReversed(),
    );
    expect(all.entries[0]).toMatchObject({
      bannerId: publicId,
      method: "accept_all",
      preferences: { necessary: true, analytics: true, marketing: false },
      timestampClamped: false,
      // Unset optional fields are null, as in a consent.given event (docs/webhooks.md).
      region: null,
      matchedRuleId: null,
      purposeChoices: null,
    });
    expect(all.nextPageToken).toBe("");
    const page = await cli.json(
      argv`logs list --team ${teamId} --banner ${publicId} --method accept_all,consent_given --since 1h --limit 2`,
    );
    expect(page.entries.map((e: { consentLogId: string }) => e.consentLogId)).toEqual([
      ids[3],
      ids[2],
    ]);
    const next = await cli.json(
      argv`logs list --team ${teamId} --method accept_all,consent_given --page-token ${page.nextPageToken}`,
    );
    expect(next.entries.map((e: { consentLogId: string }) => e.consentLogId)).toEqual([ids[0]]);
    const future = await cli.json(argv`logs list --team ${teamId} --since 2999-01-01T00:00:00Z`);
    expect(future.entries).toEqual([]);
    const human = await cli.run(argv`logs list --team ${teamId} --method consent_default`);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/RECEIVED\s+METHOD\s+BANNER/);
    expect(human.stdout).toContain("consent_default");
  });

  it("reads a --since or --until finer than a millisecond as the time it is", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const id = await record(publicId);
    const [row] = (await cli.json(argv`logs list --team ${teamId}`)).entries;
    expect(row.consentLogId).toBe(id);
    // A ten-thousandth of a second after the row's receipt, which is kept to the millisecond.
    const justAfter = new Date(row.receivedAt).toISOString().replace("Z", "1Z");
    const since = await cli.json(argv`logs list --team ${teamId} --since ${justAfter}`);
    expect(since.entries).toEqual([]);
    const until = await cli.json(argv`logs list --team ${teamId} --until ${justAfter}`);
    expect(until.entries.map((e: { consentLogId: string }) => e.consentLogId)).toEqual([id]);
    const exported = await cli.run(argv`logs export --team ${teamId} --since ${justAfter} --json`);
    expect(exported).toMatchObject({ code: 0, stdout: "" });
  });

  it("writes a visitor's line or paragraph separator as an escape, never as a line break", async () => {
    const { teamId, publicId } = await teamWithBanner();
    await record(publicId, { country: "x\u2028=1", region: "\u2029", matchedRuleId: "r" });
    const human = await cli.run(argv`logs list --team ${teamId}`);
    expect(human.code).toBe(0);
    expect(human.stdout).not.toMatch(/[\u2028\u2029]/);
    expect(human.stdout).toContain("x\\u2028=1");
    // JSON Lines: one row a line for any reader, one that also splits at U+2028 (Python's
    // splitlines) included, and the same values once parsed.
    const lines = await cli.run(argv`logs export --team ${teamId} --json`);
    expect(lines.stdout).not.toMatch(/[\u2028\u2029]/);
    expect(JSON.parse(lines.stdout)).toMatchObject({ country: "x\u2028=1", region: "\u2029" });
    const listed = await cli.run(argv`logs list --team ${teamId} --json`);
    expect(listed.stdout).not.toMatch(/[\u2028\u2029]/);
  });

  it("reads one visitor's consent record with --consent-id in list, stats and export", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const consentId = crypto.randomUUID();
    const given = await record(publicId, { consentId });
    await record(publicId, { method: "accept_all" });
    const changed = await record(publicId, { consentId, method: "consent_changed" });
    const ids = (entries: { consentLogId: string }[]) => entries.map((e) => e.consentLogId);
    const upper = consentId.toUpperCase();
    const listed = await cli.json(argv`logs list --team ${teamId} --consent-id ${upper}`);
    expect(ids(listed.entries)).toEqual([changed, given]);
    const stats = await cli.json(argv`logs stats --team ${teamId} --consent-id ${consentId}`);
    expect(stats).toMatchObject({ total: 2, explicitChoices: 2 });
    const exported = await cli.run(argv`logs export --team ${teamId} --consent-id ${consentId}`);
    expect(exported.code).toBe(0);
    const lines = exported.stdout.trimEnd().split("\n");
    expect(lines.map((line) => JSON.parse(line).consentLogId)).toEqual([given, changed]);
    const refused = await cli.run(argv`logs list --team ${teamId} --consent-id visitor-42`);
    expect([refused.code, refused.stdout]).toEqual([2, ""]);
    expect(refused.stderr).toContain('"visitor-42" is no consentId: a consentId is a UUID');
  });

  it("never shows another team's rows, whatever banner is named", async () => {
    const mine = await teamWithBanner();
    const theirs = await teamWithBanner();
    await record(theirs.publicId);
    const listed = await cli.fails(
      argv`logs list --team ${mine.teamId} --banner ${theirs.publicId}`,
    );
    expect(listed).toMatchObject({
      code: "not_found",
      error: `The team has no banner with public id ${theirs.publicId}.`,
    });
    const stats = await cli.json(argv`logs stats --team ${mine.teamId}`);
    expect(stats.total).toBe(0);
    const exported = await cli.run(argv`logs export --team ${mine.teamId} --json`);
    expect(exported).toMatchObject({ code: 0, stdout: "", stderr: "" });
  });

  it("names the banner's public id when --banner is given its own id, before any output is made", async () => {
    const { teamId, bannerId, publicId } = await teamWithBanner();
    await record(publicId);
    const out = path.join(service.dataDir, "by-banner-id.csv");
    for (const command of ["list", "stats", "export --out", "tail"]) {
      const args =
        command === "export --out" ? ["logs", "export", "--out", out] : ["logs", command];
      const slip = await cli.fails([...args, ...argv`--team ${teamId} --banner ${bannerId}`]);
      expect(slip).toMatchObject({
        code: "invalid_argument",
        error: `${bannerId} is the id of banner "B"; --banner takes its public id, ${publicId}.`,
      });
    }
    await expect(readFile(out)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("counts by method and day with the opt-in rate", async () => {
    const { teamId, publicId } = await teamWithBanner();
    await record(publicId, { method: "accept_all" });
    await record(publicId, { method: "accept_necessary", preferences: { necessary: true } });
    await record(publicId, { method: "consent_given", preferences: { marketing: true } });
    await record(publicId, { method: "consent_default" });
    const stats = await cli.json(argv`logs stats --team ${teamId} --banner ${publicId}`);
    expect(stats).toEqual({
      total: 4,
      byMethod: { accept_all: 1, accept_necessary: 1, consent_given: 1, consent_default: 1 },
      byDay: [{ day: new Date().toISOString().slice(0, 10), count: 4 }],
      explicitChoices: 3,
      optedIn: 2,
      optInRate: 2 / 3,
    });
    const human = await cli.run(argv`logs stats --team ${teamId}`);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/Opt-in rate\s+66\.7%/);
  });

  it("exports JSON Lines to stdout and quoted CSV to a file, with progress on stderr", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const wholeSecond = new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
    const first = await record(publicId, {
      country: "=HYPERLINK(1)",
      // A spreadsheet reading `;` as the separator (many locales' Excel) would start a cell at
      // `=` were the value not quoted.
      region: "x;=HYPERLINK(2)",
      timestamp: wholeSecond,
    });
    const second = await record(publicId, { preferences: { "a,b": true, 'say "hi"': false } });
    const jsonl = await cli.run(argv`logs export --team ${teamId} --json`);
    expect(jsonl).toMatchObject({ code: 0, stderr: "" });
    const lines = jsonl.stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines.map((row) => row.consentLogId)).toEqual([first, second]);
    const out = path.join(service.dataDir, `proof-${teamId}.csv`);
    const human = await cli.run(argv`logs export --team ${teamId} --format csv --out ${out}`);
    expect(human.code).toBe(0);
    expect(human.stderr).toContain("Exporting… 2 rows");
    expect(human.stderr).toContain(`Exported 2 rows as csv to ${out}.`);
    const csv = (await readFile(out, "utf8")).trimEnd().split("\n");
    expect(csv[0]).toMatch(/^consentLogId,receivedAt,occurredAt,timestampClamped,bannerId,/);
    expect(csv).toHaveLength(3);
    expect(csv[1]).toContain(`${first},`);
    // Both exports write a row's times alike (the proto JSON form).
    for (const [index, row] of lines.entries()) {
      expect(csv[index + 1]?.split(",").slice(1, 3)).toEqual([row.receivedAt, row.occurredAt]);
    }
    expect(csv[1]).toContain(`,'=HYPERLINK(1),"x;=HYPERLINK(2)",`);
    expect(csv[2]).toContain('"{""a,b"":true,""say \\""hi\\"""":false}"');
    const summary = await cli.json(argv`logs export --team ${teamId} --format csv --out ${out}`);
    expect(summary).toEqual({ rows: 2, format: "csv", out });
    // The longest name a file may have: the draft's own name does not grow with it.
    const longest = path.join(service.dataDir, `${"p".repeat(251)}.csv`);
    const long = await cli.json(argv`logs export --team ${teamId} --format csv --out ${longest}`);
    expect(long).toEqual({ rows: 2, format: "csv", out: longest });
    expect(await readFile(longest, "utf8")).toBe(await readFile(out, "utf8"));
  });

  it("writes a row's services as spec 2.4 does (category → names) in JSON Lines, --json and CSV alike", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const named = await record(publicId, { services: { analytics: ["Matomo", "Hotjar"] } });
    const none = await record(publicId);
    const jsonl = await cli.run(argv`logs export --team ${teamId} --json`);
    expect(jsonl.code).toBe(0);
    const rows = jsonl.stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(rows.map((row) => [row.consentLogId, row.services])).toEqual([
      [named, { analytics: ["Matomo", "Hotjar"] }],
      [none, {}],
    ]);
    const listed = (await cli.json(argv`logs list --team ${teamId}`)) as {
      entries: { consentLogId: string; services: unknown }[];
    };
    expect(listed.entries.map((row) => [row.consentLogId, row.services])).toEqual([
      [none, {}],
      [named, { analytics: ["Matomo", "Hotjar"] }],
    ]);
    const out = path.join(service.dataDir, `services-${teamId}.csv`);
    expect((await cli.run(argv`logs export --team ${teamId} --format csv --out ${out}`)).code).toBe(
      0,
    );
    const csv = (await readFile(out, "utf8")).trimEnd().split("\n");
    expect(csv[0]).toMatch(/,services$/);
    expect(csv[1]).toMatch(/,"\{""analytics"":\[""Matomo"",""Hotjar""\]\}"$/);
    expect(csv[2]).toMatch(/,$/);
  });

  it("shows rows exported to the terminal without a progress line redrawn between them", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const ids = [await record(publicId), await record(publicId)];
    const { code, screen } = await runCliOnTerminal([
      ...argv`logs export --team ${teamId}`,
      ...argv`--daemon ${service.daemonUrl} --token ${service.operatorToken}`,
    ]);
    expect(code).toBe(0);
    const lines = screen.split("\r\n");
    expect(lines.slice(0, 2).map((line) => JSON.parse(line).consentLogId)).toEqual(ids);
    expect(lines[2]).toBe("Exported 2 rows as jsonl to stdout.");
    expect(screen).not.toContain("Exporting…");
  });

  it("writes through a link to a file not there yet, and says so when the link points nowhere", async () => {
    const { teamId, publicId } = await teamWithBanner();
    await record(publicId);
    const link = path.join(service.dataDir, `link-${teamId}.jsonl`);
    const target = path.join(service.dataDir, `target-${teamId}.jsonl`);
    await symlink(target, link);
    const written = await cli.run(argv`logs export --team ${teamId} --out ${link}`);
    expect(written.code).toBe(0);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect((await readFile(target, "utf8")).trimEnd().split("\n")).toHaveLength(1);
    // Made anew, the file is its owner's alone; one already there keeps its mode.
    expect((await stat(target)).mode & 0o777).toBe(0o600);
    await chmod(target, 0o640);
    expect((await cli.run(argv`logs export --team ${teamId} --out ${link}`)).code).toBe(0);
    expect((await stat(target)).mode & 0o777).toBe(0o640);
    const nowhere = path.join(service.dataDir, `nowhere-${teamId}.jsonl`);
    await symlink(path.join(service.dataDir, "no-such-directory", "x.jsonl"), nowhere);
    const refused = await cli.fails(argv`logs export --team ${teamId} --out ${nowhere}`);
    expect(refused).toMatchObject({ code: "output_unwritable" });
    expect(refused.error).toContain("no-such-directory does not exist");
    expect((await lstat(nowhere)).isSymbolicLink()).toBe(true);
  });

  /**
   * A tail of `args` that follows while `rows` records its rows, stopped by Ctrl-C once it has
   * shown the consentId `rows` returns: how it ended.
   */
  async function tailWhile(args: string[], rows: () => Promise<string>): Promise<CliRun> {
    const tail = cli.start(args);
    await tail.waitFor("stderr", (text) => text.includes("press Ctrl-C to stop"));
    const consentId = await rows();
    await tail.waitFor("stdout", (text) => text.includes(consentId));
    return tail.interrupt();
  }

  // Regression: a terminal narrowed from the table to blocks kept the header line, printed as
  // the tail began following, right above the first block.
  it("follows a terminal's resize: rows as blocks while it is narrow, a header and table lines once widened", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const connection = ["--daemon", service.daemonUrl, "--token", service.operatorToken];
    const tail = await startCliOnTerminal(
      [...argv`logs tail --team ${teamId}`, ...connection],
      { CONSENT_DATA_DIR: service.dataDir, NO_COLOR: "1" },
      { columns: 200 },
    );
    await tail.waitFor((screen) => screen.includes("press Ctrl-C to stop"));
    // Each row at a width of its own: narrowed before the first, widened, narrowed again.
    const recordAt = async (columns: number) => {
      await tail.resize(columns);
      const consentId = crypto.randomUUID();
      await record(publicId, { consentId });
      await tail.waitFor((screen) => screen.includes(consentId));
      return consentId;
    };
    const narrow = await recordAt(60);
    const wide = await recordAt(200);
    const narrowAgain = await recordAt(60);
    const { code, screen } = await tail.stop();
    expect(code).toBe(0);
    const lines = screen.split("\r\n");
    const at = (consentId: string) => lines.findIndex((line) => line.includes(consentId));
    const headers = lines.flatMap((line, i) =>
      /^RECEIVED\s+METHOD\s+BANNER/.test(line) ? [i] : [],
    );
    // One header: none above the rows printed as blocks at 60 columns, labelled lines instead.
    expect(headers).toHaveLength(1);
    for (const consentId of [narrow, narrowAgain]) {
      expect(lines[at(consentId)]).toBe(`CONSENT ID  ${consentId}`);
    }
    // Widened, the header comes first, then the row as one line of the table.
    expect(headers[0]).toBeGreaterThan(at(narrow));
    expect(at(wide)).toBe((headers[0] ?? 0) + 1);
    expect(lines[at(wide)]).toMatch(/consent_given/);
    expect(at(narrowAgain)).toBeGreaterThan(at(wide));
  });

  // Regression: a tail whose terminal was closed (its window, an ssh connection) was ended by
  // the hang-up's SIGHUP (status 129, its stream cut rather than closed) when it ran in the
  // terminal's foreground, and ran on until its next row's write failed when it had been left
  // running (disowned): on a quiet log, for hours, holding a daemon stream. It ends with the
  // status of a reader gone (`| head -n1`) either way, as soon as the terminal is closed: the
  // test records no row.
  it.for([
    ["in the terminal's foreground", "foreground"],
    ["left running in a session of its own", "own-session"],
  ] as const)(
    "ends quietly with 0 once its terminal is closed, %s, with no row to write",
    async ([, place], { onTestFinished }) => {
      const { teamId } = await teamWithBanner();
      const connection = ["--daemon", service.daemonUrl, "--token", service.operatorToken];
      const tail = await startCliOnClosingTerminal(
        [...argv`logs tail --team ${teamId}`, ...connection],
        { CONSENT_DATA_DIR: service.dataDir, NO_COLOR: "1" },
        { place, onTestFinished },
      );
      const following = await tail.waitForStderr((text) => text.includes("press Ctrl-C to stop"));
      tail.close();
      expect(await tail.ended()).toEqual({ code: 0, stderr: following });
    },
  );

  it("follows rows recorded after it started until Ctrl-C, then exits 0", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const before = await record(publicId);
    const ended = await tailWhile(
      argv`logs tail --team ${teamId} --method consent_given`,
      async () => {
        await record(publicId, { method: "accept_all" }); // filtered out
        const consentId = crypto.randomUUID();
        await record(publicId, { consentId });
        return consentId;
      },
    );
    expect(ended).toMatchObject({ code: 0, signal: null });
    const lines = ended.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^RECEIVED\s+METHOD\s+BANNER/);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain("consent_given");
    expect(ended.stdout).not.toContain(before);
  });

  // Regression: with --banner a tail kept the BANNER column, which `logs list --banner` drops.
  it("leaves the BANNER column out of a tail of one banner, as logs list does", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const consentId = crypto.randomUUID();
    const ended = await tailWhile(
      argv`logs tail --team ${teamId} --banner ${publicId}`,
      async () => {
        await record(publicId, { consentId });
        return consentId;
      },
    );
    expect(ended).toMatchObject({ code: 0, signal: null });
    const lines = ended.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^RECEIVED {2,}METHOD {2,}CONSENT ID {2,}COUNTRY {2,}ACCEPTED$/);
    expect(lines[1]).toMatch(new RegExp(`^\\S+ \\S+ {2,}consent_given {2,}${consentId} `));
    expect(ended.stdout).not.toContain(publicId);
  });

  // Regression: Ctrl-C in the fifth of a second the CLI takes to load ended it by the signal
  // (exit 130), where a tail stopped a moment later exits 0 and an export 1; and so did SIGHUP
  // (a terminal closing as the command starts: exit 129), which the launcher did not hold.
  it.for([
    ["a Ctrl-C", "SIGINT"],
    ["a SIGHUP", "SIGHUP"],
  ] as const)(
    "ends a tail with 0 and fails an export with 1, FILE kept, for %s while the CLI loads",
    async ([, signal]) => {
      const { teamId, publicId } = await teamWithBanner();
      await record(publicId);
      const dir = path.join(service.dataDir, `early-${teamId}`);
      await mkdir(dir);
      const out = path.join(dir, "proof.jsonl");
      await writeFile(out, "kept\n");
      const early = (args: string[]) =>
        endedByItself(
          cli.start(args, {
            env: {
              NODE_OPTIONS: `--import ${INTERRUPT_WHILE_LOADING}`,
              INTERRUPT_WHILE_LOADING_SIGNAL: signal,
            },
          }),
        );
      // All at once, so the test's bound holds one that never ends.
      const [tail, tailJson, exported, exportedJson, list] = await Promise.all([
        early(argv`logs tail --team ${teamId}`),
        early(argv`logs tail --team ${teamId} --banner ${publicId} --json`),
        early(argv`logs export --team ${teamId} --out ${out}`),
        early(argv`logs export --team ${teamId} --json`),
        early(argv`teams list`),
      ]);
      expect(tail).toEqual({ code: 0, signal: null, stdout: "", stderr: "" });
      expect(tailJson).toEqual({ code: 0, signal: null, stdout: "", stderr: "" });
      expect(exported).toMatchObject({ code: 1, signal: null, stdout: "" });
      expect(exported.stderr).toContain(`The export was interrupted; ${out} was left as it was.`);
      expect(exportedJson).toMatchObject({ code: 1, signal: null, stdout: "" });
      expect(JSON.parse(exportedJson.stderr)).toEqual({
        error: "The export was interrupted; its output is incomplete.",
        code: "interrupted",
        hint: "run the command again and let it finish",
      });
      expect(await readdir(dir)).toEqual(["proof.jsonl"]);
      expect(await readFile(out, "utf8")).toBe("kept\n");
      // Any other command still ends by the signal, as it did.
      expect(list).toMatchObject({ code: null, signal });
    },
  );

  it("stops at once on Ctrl-C while --banner is checked with a daemon that has not answered", async () => {
    const requests: (() => void)[] = [];
    const silent = await rawServer(() => requests.shift()?.());
    try {
      const out = path.join(service.dataDir, `silent-${crypto.randomUUID()}.jsonl`);
      const cases = [
        [argv`logs tail --team t --banner ${crypto.randomUUID()}`, 0],
        [argv`logs export --team t --banner ${crypto.randomUUID()} --out ${out} --json`, 1],
      ] as const;
      for (const [args, code] of cases) {
        const asked = new Promise<void>((resolve) => requests.push(resolve));
        const running = startCli([...args, "--daemon", silent.url, "--token", "operator-token"]);
        await asked;
        const ended = await running.interrupt();
        expect(ended, args.join(" ")).toMatchObject({ code, signal: null, stdout: "" });
      }
      await expect(readFile(out)).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      await silent.close();
    }
  });

  it("prints each followed row as one JSON line with --json, nothing on stderr", async () => {
    const { teamId, publicId } = await teamWithBanner();
    const tail = cli.start(argv`logs tail --team ${teamId} --banner ${publicId} --json`);
    // The JSON form announces nothing: record until a row recorded after the start shows up.
    const recorded: string[] = [];
    while (!tail.stdout().includes("\n")) {
      recorded.push(await record(publicId));
      await Promise.race([
        tail.waitFor("stdout", (text) => text.includes("\n")),
        new Promise((resolve) => setTimeout(resolve, 200)),
      ]);
    }
    const ended = await tail.interrupt();
    expect(ended).toMatchObject({ code: 0, signal: null, stderr: "" });
    const rows = ended.stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(recorded).toContain(row.consentLogId);
      expect(row).toMatchObject({ bannerId: publicId, method: "consent_given" });
    }
  });

  // Regression: Node's own words ("ENOENT: no such file or directory, open
  // '/nonexistent/dir/.consent-export-5302.partial'", EISDIR), with a hint about free space.
  it("says in words why --out cannot be written: a missing directory, a directory", async () => {
    const { teamId } = await teamWithBanner();
    const missing = path.join(service.dataDir, "no-such-dir", "proof.jsonl");
    const [noDirectory, directory] = await Promise.all([
      cli.fails(argv`logs export --team ${teamId} --out ${missing}`),
      cli.fails(argv`logs export --team ${teamId} --out ${service.dataDir}`),
    ]);
    expect(noDirectory).toEqual({
      error: `Cannot write ${missing}: the directory ${path.dirname(missing)} does not exist.`,
      code: "output_unwritable",
      hint: "create the directory first, or name a file in one that exists",
    });
    expect(directory).toEqual({
      error: `Cannot write ${service.dataDir}: it is a directory.`,
      code: "output_unwritable",
      hint: "name a file, in that directory or another",
    });
  });

  it("counts one exported row as one row", async () => {
    const { teamId, publicId } = await teamWithBanner();
    await record(publicId);
    const exported = await cli.run(argv`logs export --team ${teamId} --format csv`);
    expect(exported.code).toBe(0);
    expect(exported.stderr).toBe("Exporting… 1 row\nExported 1 row as csv to stdout.\n");
  });

  it("exits 2 for a malformed time, limit, method or range", async () => {
    const { teamId } = await teamWithBanner();
    const [since, impossibleDay, limit, csvToStdout] = await Promise.all([
      cli.run(argv`logs list --team ${teamId} --since yesterday --json`),
      cli.run(argv`logs list --team ${teamId} --since 2026-02-30T00:00:00Z`),
      cli.run(argv`logs list --team ${teamId} --limit 5000`),
      cli.run(argv`logs export --team ${teamId} --format csv --json`),
    ]);
    for (const result of [since, impossibleDay, limit, csvToStdout]) {
      expect(result.code).toBe(2);
      expect(result.stdout).toBe("");
    }
    expect(JSON.parse(since.stderr)).toMatchObject({ code: "usage" });
    // Regression: Date read February 30 as March 2 and the list ran from there.
    expect(impossibleDay.stderr).toContain('"2026-02-30T00:00:00Z" is not an ISO 8601 date-time');
    const [method, emptyRange, sameDuration] = await Promise.all([
      cli.run(argv`logs stats --team ${teamId} --method reject_all`),
      cli.run(argv`logs list --team ${teamId} --since 1h --until 2h`),
      // Both durations count back from one "now": the range is empty, not a few milliseconds.
      cli.run(argv`logs stats --team ${teamId} --since 1h --until 1h`),
    ]);
    for (const result of [method, emptyRange, sameDuration]) {
      expect([result.code, result.stdout]).toEqual([2, ""]);
    }
    expect(method.stderr).toContain("unknown method reject_all; the methods are consent_given,");
    expect(emptyRange.stderr).toContain("--since (");
    expect(emptyRange.stderr).toContain(") must be before --until (");
  });
});

describe("consentctl logs tail when the daemon goes away", { timeout: E2E_TIMEOUT_MS }, () => {
  const dirs = useProgramRoot("consent-tail-");

  it("says the daemon ended the tail as it shut down, or that the connection was cut when it was killed", async () => {
    const dataDir = dirs.join("data");
    const endings = [
      ["SIGTERM", "The daemon ended the tail: it is shutting down."],
      [
        "SIGKILL",
        "The tail's connection to the daemon was cut: the daemon stopped, or the network failed.",
      ],
    ] as const;
    for (const [signal, said] of endings) {
      const daemon = startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dataDir });
      const daemonUrl = await daemon.waitFor(DAEMON_URL);
      const operatorToken = (await readFile(path.join(dataDir, "admin-token"), "utf8")).trim();
      const cli = cliFor({ daemonUrl, operatorToken, dataDir } as TestService);
      const team = await cli.json(argv`teams create --name ${"Tail team"} --plan professional`);
      const tail = cli.start(argv`logs tail --team ${team.id}`);
      await tail.waitFor("stderr", (text) => text.includes("press Ctrl-C to stop"));
      await daemon.stop(signal);
      const ended = await tail.ended;
      expect([signal, ended.code]).toEqual([signal, 1]);
      expect(ended.stderr).toContain(said);
      expect(ended.stderr).toContain("run the command again once the daemon is back");
    }
  });
});
