import { Console } from "node:console";
import { Command } from "commander";
import { Box, Text } from "ink";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type CommandSpec, runCommand, type Session } from "#cli/run-command.js";
import { MemoryStream } from "#cli/test-support/memory-io.js";

// Ink writes only the final frame when it detects CI (is-in-ci, read when Ink loads); these tests
// look at the frames an operator's terminal shows, so they run as outside CI wherever they run.
vi.hoisted(() => {
  process.env.CI = "false";
  delete process.env.CONTINUOUS_INTEGRATION;
});

const NAMES = ["alpha", "bravo", "charlie", "delta", "echo"];
const TABLE = `NAME\n${NAMES.join("\n")}\n`;

/** A command whose answer takes a while (so a spinner shows) and whose view is 6 lines tall. */
const listSpec: CommandSpec<string[]> = {
  progress: "Listing names…",
  auth: "none",
  call: () => new Promise((resolve) => setTimeout(() => resolve(NAMES), 200)),
  json: (names) => ({ names }),
  view: async () => (names) => (
    <Box flexDirection="column">
      <Text>NAME</Text>
      {names.map((name) => (
        <Text key={name}>{name}</Text>
      ))}
    </Box>
  ),
};

/** A terminal `rows` lines tall that keeps what is written to it. */
function terminal(rows: number): MemoryStream & NodeJS.WriteStream {
  return Object.assign(new MemoryStream(), { isTTY: true, rows, columns: 100 }) as never;
}

async function run(stdout: MemoryStream & NodeJS.WriteStream, env: NodeJS.ProcessEnv = {}) {
  const io = { stdout, stderr: new MemoryStream() as MemoryStream & NodeJS.WriteStream, env };
  const session: Session = { exitCode: -1 };
  await runCommand(new Command(), listSpec, io, session);
  return { exitCode: session.exitCode, stdout: stdout.text, stderr: io.stderr.text };
}

const occurrences = (text: string, part: string) => text.split(part).length - 1;

describe("runCommand on a terminal", () => {
  // The runner lets Ink patch the console (the --debug call log); vitest's console has no
  // Console constructor for it to do so with.
  const testConsole = console as { Console?: typeof Console };
  const vitestConsole = testConsole.Console;
  beforeAll(() => {
    testConsole.Console = Console;
  });
  afterAll(() => {
    testConsole.Console = vitestConsole;
  });

  it("shows a spinner, then writes a frame taller than the terminal once, without clearing the screen", async () => {
    const { exitCode, stdout, stderr } = await run(terminal(4));
    expect(exitCode).toBe(0);
    expect(stderr).toBe("");
    expect(stdout).toContain("Listing names…");
    expect(stdout).not.toContain("\x1b[2J"); // erase screen
    expect(stdout).not.toContain("\x1b[3J"); // erase scrollback
    expect(stdout).not.toContain("\x1b[H"); // cursor home
    expect(occurrences(stdout, "NAME")).toBe(1);
    expect(occurrences(stdout, "charlie")).toBe(1);
    // The spinner's lines are erased before the frame, and nothing is written after it.
    expect(stdout.endsWith(TABLE)).toBe(true);
  });

  // Regression: on a pseudo-terminal of no known size (0 rows: `script` without a terminal, some
  // `docker exec -t`) or of one row, the spinner's first frame cleared screen and scrollback.
  it.each([0, 1, 2])(
    "writes only the final frame on a terminal %i rows tall, never clearing it",
    async (rows) => {
      const { exitCode, stdout } = await run(terminal(rows));
      expect(exitCode).toBe(0);
      expect(stdout).not.toContain("Listing names…");
      expect(stdout).not.toContain("\x1b");
      expect(stdout).toBe(TABLE);
    },
  );

  it("writes only the final frame with TERM=dumb: no spinner and no cursor control", async () => {
    const { exitCode, stdout } = await run(terminal(40), { TERM: "dumb" });
    expect(exitCode).toBe(0);
    expect(stdout).not.toContain("Listing names…");
    expect(stdout).not.toContain("\x1b");
    expect(stdout).toBe(TABLE);
  });

  it("writes only the final frame when piped", async () => {
    const stdout = new MemoryStream() as MemoryStream & NodeJS.WriteStream;
    const result = await run(stdout);
    expect(result.stdout).toBe(TABLE);
  });
});
