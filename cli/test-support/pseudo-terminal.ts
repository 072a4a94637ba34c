import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { BIN, childEnv } from "#cli/test-support/cli-process.js";

/**
 * consentctl on a pseudo-terminal (util-linux `script`), as an operator runs it in a terminal
 * window: its output as the terminal shows it, a resize, a stop, and the terminal closing.
 */

/** A word as a POSIX shell reads it back unchanged. */
export function quote(word: string): string {
  return `'${word.replaceAll("'", "'\\''")}'`;
}

/** `consentctl args…` as a POSIX shell command line: bin/consentctl.js run by this Node. */
export function consentctlCommand(args: readonly string[]): string {
  return [process.execPath, BIN, ...args].map(quote).join(" ");
}

/**
 * Runs consentctl on a pseudo-terminal (util-linux `script`), as an operator types it: stdout
 * and stderr are the same terminal, and what it shows comes back as one text (lines end "\r\n").
 * With `columns`, the terminal is that wide and 24 rows tall (`stty`); else it reports no size.
 * The text is what the program wrote: a line wider than the terminal is one line in it, which
 * the terminal wraps softly.
 */
export async function runCliOnTerminal(
  args: readonly string[],
  env: Record<string, string> = {},
  { columns }: { columns?: number } = {},
): Promise<{ code: number | null; screen: string }> {
  const program = consentctlCommand(args);
  const command =
    columns === undefined ? program : `stty cols ${columns} rows 24 && exec ${program}`;
  return onTerminal(command, env).closed;
}

/**
 * Runs `command` (a shell's) on a pseudo-terminal (util-linux `script`) with consentctl's
 * environment (childEnv, TERM=xterm): what the terminal has shown so far, its exit status with
 * all it showed once it ends, and a close of the terminal, as closing its window does (`script`
 * killed: the terminal's master end goes away, and the terminal hangs up).
 */
export function onTerminal(
  command: string,
  env: Record<string, string>,
): {
  screen: () => string;
  closed: Promise<{ code: number | null; screen: string }>;
  hangUp: () => void;
} {
  const child = spawn("script", ["-qec", command, "/dev/null"], {
    env: childEnv({ TERM: "xterm", ...env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let screen = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (screen += chunk));
  const closed = once(child, "close").then(([code]) => ({ code: code as number | null, screen }));
  return { screen: () => screen, closed, hangUp: () => child.kill("SIGKILL") };
}

/**
 * The value `read` gives once it gives one, asked every 50 ms for 30 s; then fails, saying `what`
 * did not come, and what was seen meanwhile: `seen()`.
 */
export async function pollFor<T>(
  read: () => Promise<T | undefined>,
  what: string,
  seen: () => string,
): Promise<T> {
  for (let tries = 0; tries < 600; tries++) {
    const value = await read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what} within 30 s; ${seen()}`);
}

/** A `consentctl` running on a pseudo-terminal (startCliOnTerminal). */
export interface CliOnTerminal {
  /** Resolves with what the terminal has shown once it satisfies `test`. */
  waitFor(test: (screen: string) => boolean): Promise<string>;
  /** Makes the terminal `columns` wide, as a window's resize does: the program gets SIGWINCH. */
  resize(columns: number): Promise<void>;
  /** Sends SIGTERM and resolves with the exit status and all the terminal showed. */
  stop(): Promise<{ code: number | null; screen: string }>;
}

/**
 * Starts consentctl on a pseudo-terminal `columns` wide and 24 rows tall, as runCliOnTerminal
 * does, and returns at once. The shell around it (no job control: the program stays in the
 * terminal's foreground process group) changes the terminal's size when asked through a file.
 */
export async function startCliOnTerminal(
  args: readonly string[],
  env: Record<string, string>,
  { columns }: { columns: number },
): Promise<CliOnTerminal> {
  const control = await mkdtemp(path.join(tmpdir(), "consentctl-terminal-"));
  const file = (name: string) => path.join(control, name);
  const program = consentctlCommand(args);
  const command = [
    `stty cols ${columns} rows 24`,
    `${program} & pid=$!; echo $pid > ${quote(file("pid"))}`,
    `while kill -0 $pid 2>/dev/null; do if [ -e ${quote(file("cols"))} ]; then stty cols $(cat ${quote(file("cols"))}) rows 24; rm ${quote(file("cols"))}; touch ${quote(file("resized"))}; fi; sleep 0.05; done`,
    "wait $pid",
  ].join("\n");
  const { screen, closed } = onTerminal(command, env);
  const until = <T>(read: () => Promise<T | undefined>, what: string) =>
    pollFor(read, what, () => `the terminal showed: ${JSON.stringify(screen())}`);
  const exists = (name: string) =>
    stat(file(name)).then(
      () => true,
      () => undefined,
    );
  return {
    waitFor: (test) => until(async () => (test(screen()) ? screen() : undefined), "no such screen"),
    async resize(to) {
      // Written whole, then renamed into place: the shell's loop, which reads the file as soon as
      // it exists, would otherwise read it empty between its creation and its write (a loaded
      // machine), set no width and report the resize done.
      await writeFile(file("cols.next"), String(to));
      await rename(file("cols.next"), file("cols"));
      await until(() => exists("resized"), "no resize");
      await rm(file("resized"));
    },
    async stop() {
      const pid = await until(
        // The shell writes the file after creating it: read empty, it is not there yet (and
        // Number("") is 0, which process.kill takes for this whole process group).
        () =>
          readFile(file("pid"), "utf8").then(
            (text) => Number(text) || undefined,
            () => undefined,
          ),
        "no program",
      );
      process.kill(pid, "SIGTERM");
      const ended = await closed;
      await rm(control, { recursive: true, force: true });
      return ended;
    },
  };
}
