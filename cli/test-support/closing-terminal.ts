import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { TestContext } from "vitest";
import {
  consentctlCommand,
  onTerminal,
  pollFor,
  quote,
} from "#cli/test-support/pseudo-terminal.js";

/** A `consentctl` whose stdout is a terminal closed while it runs (startCliOnClosingTerminal). */
export interface CliOnClosingTerminal {
  /** Resolves with what consentctl wrote to stderr once that satisfies `test`. */
  waitForStderr(test: (stderr: string) => boolean): Promise<string>;
  /** Closes the terminal, as closing its window does: it hangs up. */
  close(): void;
  /**
   * Resolves once consentctl has ended by itself: its exit status (128 + the signal's number when
   * a signal ended it) and all it wrote to stderr. It waits as long as the test runs: one still
   * running when the test ends (its time limit) is killed then, and the test has failed.
   */
  ended(): Promise<{ code: number; stderr: string }>;
}

/**
 * Where consentctl runs on the terminal: `foreground`, in the terminal's foreground process
 * group, as a command typed at the prompt runs, to which the terminal's hang-up comes as SIGHUP
 * (the kernel sends it once the terminal's session leader, the shell, has ended by its own
 * SIGHUP); `own-session`, in a session of its own, as a job its shell left running (`disown`)
 * is once the window is closed, to which the hang-up sends no SIGHUP: only its own use of the
 * terminal (a write, a read of its size) finds the terminal gone.
 */
export type ClosingTerminalPlace = "foreground" | "own-session";

/**
 * Starts consentctl with stdout on a pseudo-terminal (util-linux `script`) 200 columns wide and
 * stderr to a file, and returns at once. A shell around it records its exit status: in the
 * foreground it takes SIGHUP with a trap of its own (a trap, not an ignored signal, so consentctl
 * gets SIGHUP's default disposition) and outlives the hang-up. `onTestFinished` is the test's
 * own (its context's, which a concurrent test needs): consentctl is stopped then if it still runs.
 */
export async function startCliOnClosingTerminal(
  args: readonly string[],
  env: Record<string, string>,
  { place, onTestFinished }: { place: ClosingTerminalPlace } & Pick<TestContext, "onTestFinished">,
): Promise<CliOnClosingTerminal> {
  const control = await mkdtemp(path.join(tmpdir(), "consentctl-closing-terminal-"));
  const stderrFile = path.join(control, "stderr");
  const statusFile = path.join(control, "status");
  const pidFile = path.join(control, "pid");
  // consentctl, its pid written first (`exec` keeps it), its status written once it has ended.
  const program = `echo $$ >${quote(pidFile)}; exec ${consentctlCommand(args)}`;
  const job = [
    "trap : HUP",
    `sh -c ${quote(program)} 2>${quote(stderrFile)}`,
    `echo $? >${quote(statusFile)}`,
  ].join("\n");
  // The session leader is the outer shell, which the hang-up ends; `; true` keeps it from
  // handing its process over to the job's shell, which would then be the leader, survive, and
  // leave the foreground without SIGHUP.
  const run =
    place === "foreground" ? `sh -c ${quote(job)}; true` : `setsid -w sh -c ${quote(job)}`;
  const terminal = onTerminal(`stty cols 200 rows 24 && ${run}`, env);
  const readOr = (file: string) => readFile(file, "utf8").catch(() => undefined);
  let stderr = "";
  const readStderr = async () => {
    stderr = (await readOr(stderrFile)) ?? stderr;
    return stderr;
  };
  let testFinished = false;
  onTestFinished(async () => {
    testFinished = true;
    const pid = Number(await readOr(pidFile));
    if (pid > 0 && (await readOr(statusFile)) === undefined) {
      try {
        process.kill(pid, "SIGKILL");
      } catch (error) {
        // ESRCH: it ended meanwhile, and there is nothing to stop.
        if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
      }
    }
    terminal.hangUp();
    await rm(control, { recursive: true, force: true });
  });
  return {
    waitForStderr: (test) =>
      pollFor(
        async () => {
          const text = await readStderr();
          return test(text) ? text : undefined;
        },
        "no such stderr",
        () => `consentctl wrote to stderr: ${JSON.stringify(stderr)}`,
      ),
    close: terminal.hangUp,
    async ended() {
      while (!testFinished) {
        const status = await readOr(statusFile);
        if (status?.endsWith("\n")) return { code: Number(status), stderr: await readStderr() };
        await sleep(50);
      }
      throw new Error(`consentctl was still running as the test ended; stderr: ${stderr}`);
    },
  };
}
