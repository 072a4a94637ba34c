import { closeSync, openSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import {
  E2E_TIMEOUT_MS,
  runCli,
  runCliFromSources,
  startCli,
} from "#cli/test-support/cli-process.js";

/** Sends the process a signal as it first writes to stdout: as it writes its final frame. */
const INTERRUPT_AT_OUTPUT = new URL("./test-support/interrupt-at-output.mjs", import.meta.url)
  .pathname;

/** A port nothing listens on: `health` reports the daemon unreachable, on stdout, exit 1. */
const NOWHERE = ["--daemon", "http://127.0.0.1:9"];

/**
 * Runs consentctl with stdout's (or stderr's) reader already gone, as `| head -2` is once it has
 * its lines. Closed at once rather than after a first chunk: every one of these writes its output
 * in one piece, so only a reader gone before that write makes the write fail.
 */
async function withReaderGone(args: string[], stream: "stdout" | "stderr") {
  const cli = startCli(args);
  if (stream === "stdout") cli.closeStdout();
  else cli.closeStderr();
  return cli.ended;
}

describe("consentctl as a process", { timeout: E2E_TIMEOUT_MS }, () => {
  // Regression: `consentctl sessions revoke --help | head -2` ended with "Error: write EPIPE"
  // and its stack, as did every command's output but `logs tail` and `logs export`.
  it("ends quietly, with its own exit status, when the reader of stdout has gone", async () => {
    const cases: [string[], number][] = [
      [["sessions", "revoke", "--help"], 0],
      [["--help"], 0],
      [["--version"], 0],
      // The final frame through Ink, and the JSON printer.
      [["health", ...NOWHERE], 1],
      [["health", ...NOWHERE, "--json"], 1],
    ];
    const runs = await Promise.all(cases.map(([args]) => withReaderGone(args, "stdout")));
    for (const [index, run] of runs.entries()) {
      const [args, code] = cases[index] as [string[], number];
      expect({ code: run.code, signal: run.signal, stderr: run.stderr }, args.join(" ")).toEqual({
        code,
        signal: null,
        stderr: "",
      });
    }
  });

  it("ends with its own exit status when the reader of stderr has gone", async () => {
    // A usage error (exit 2) is told apart from a crash (exit 1) by its status alone.
    const runs = await Promise.all([
      withReaderGone(["teams", "show"], "stderr"),
      withReaderGone(["teams", "show", "--json"], "stderr"),
    ]);
    for (const run of runs)
      expect({ code: run.code, signal: run.signal }).toEqual({ code: 2, signal: null });
  });

  it("says once, without a stack, that stdout cannot be written, and exits 1", async () => {
    const full = openSync("/dev/full", "w");
    try {
      for (const args of [["--help"], ["--version"], ["sessions", "revoke", "--help"]]) {
        const run = await runCli(args, { stdout: full });
        expect([args.join(" "), run.code, run.stderr]).toEqual([
          args.join(" "),
          1,
          "✖ Cannot write stdout: the disk is full.\nhint: free space on that disk, or write elsewhere\n",
        ]);
      }
      // A usage error keeps its status (2) when stderr cannot be written either.
      const usage = await runCli(["teams", "show"], { stderr: full });
      expect(usage.code).toBe(2);
      const json = await runCli(["--version", "--json"], { stdout: full });
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stderr)).toMatchObject({
        error: "Cannot write stdout: the disk is full.",
        code: "output_unwritable",
      });
    } finally {
      closeSync(full);
    }
  });

  it("refuses a credential given where an id belongs, in any command, sending and printing neither", async () => {
    const secrets = {
      operator: `consent_op_${"o".repeat(43)}`,
      signing: `whsec_${"s".repeat(43)}`,
    };
    const runs = await Promise.all([
      runCli(["teams", "show", secrets.operator, ...NOWHERE]),
      runCli(["banners", "list", "--team", secrets.operator, ...NOWHERE, "--json"]),
      runCli(["webhooks", "show", secrets.signing, "--team", "t", ...NOWHERE]),
    ]);
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toContain("(it was not sent, nor is it printed here)");
      expect(run.stderr).not.toMatch(/ooooo|sssss/);
    }
  });

  // Regression: a refused value is quoted by commander ("argument '…' is invalid"), so a key
  // pasted with a sentence's full stop, a token with a stray space and a --daemon URL's password
  // went to the terminal (and a CI log) in full, the key twice.
  it("refuses a credential pasted with a stray character, a --token and a --daemon password without printing them", async () => {
    const secrets = {
      key: `ck_live_${"k".repeat(38)}`,
      session: `cs_${"c".repeat(43)}`,
      token: `${"t".repeat(40)} `,
      password: "pppppppppp",
    };
    const runs = await Promise.all([
      runCli(["keys", "revoke", `${secrets.key}.`, ...NOWHERE]),
      runCli(["sessions", "revoke", `${secrets.session} `, ...NOWHERE, "--json"]),
      runCli(["banners", "list", "--team", `${secrets.key},`, ...NOWHERE]),
      runCli(["teams", "list", "--token", secrets.token, ...NOWHERE]),
      runCli(["teams", "list", "--token", secrets.token, ...NOWHERE, "--json"]),
      runCli(["teams", "list", "--daemon", `http://operator:${secrets.password}@127.0.0.1:9/x`]),
    ]);
    for (const run of runs) {
      expect(run.code).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).not.toMatch(/kkkkk|ccccc|ttttt|ppppp/);
    }
    expect(runs.slice(0, 3).map((run) => run.stderr)).toEqual(
      Array(3).fill(expect.stringContaining("(it was not sent, nor is it printed here)")),
    );
    expect(runs[3]?.stderr).toContain(
      "option '--token <token>' is invalid: the token holds a space, a control character or a non-ASCII character",
    );
    expect(JSON.parse(runs[4]?.stderr ?? "")).toMatchObject({ code: "usage" });
    expect(runs[5]?.stderr).toContain("option '--daemon <url>' is invalid: The daemon URL must be");
  });

  // Regression: a Ctrl-C while Ink drew the final frame reached a listener of Ink's that the
  // frame's unmount had removed before Node handed the signal on, so it was lost: the command
  // went on to its own exit status (1 for this health report, 0 for a list).
  it("ends by the signal when Ctrl-C, SIGTERM or SIGHUP comes as it writes its final frame", async () => {
    const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
    const runs = await Promise.all(
      signals.map(
        (signal) =>
          startCli(["health", ...NOWHERE], {
            env: {
              NODE_OPTIONS: `--import ${INTERRUPT_AT_OUTPUT}`,
              INTERRUPT_AT_OUTPUT_SIGNAL: signal,
            },
          }).ended,
      ),
    );
    expect(runs.map(({ code, signal }) => ({ code, signal }))).toEqual(
      signals.map((signal) => ({ code: null, signal })),
    );
  });

  it("prints package.json's version from the bundle and from the sources alike", async () => {
    const { version } = JSON.parse(
      await readFile(new URL("../package.json", import.meta.url), "utf8"),
    );
    const [bundled, sources, json] = await Promise.all([
      runCli(["--version"]),
      runCliFromSources(["-V"]),
      runCli(["--version", "--json"]),
    ]);
    for (const run of [bundled, sources]) {
      expect(run).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
    }
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ version });
  });
});
