import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
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
   * Resolves once consentctl has ended by itself: its exit status and all it wrote to stderr.
   * One still running 30 s on is killed, and this fails.
   */
  ended(): Promise<{ code: number; stderr: string }>;
}

/**
 * Starts consentctl with stdout on a pseudo-terminal (util-linux `script`) and stderr to a file,
 * and returns at once. consentctl runs in a session of its own, as a job its shell left running
 * (`disown`) does once the window is closed: the terminal's hang-up sends it no SIGHUP, and only
 * its own use of the terminal (a write, a read of its size) finds the terminal gone.
 */
export async function startCliOnClosingTerminal(
  args: readonly string[],
  env: Record<string, string>,
): Promise<CliOnClosingTerminal> {
  const control = await mkdtemp(path.join(tmpdir(), "consentctl-closing-terminal-"));
  const stderrFile = path.join(control, "stderr");
  const statusFile = path.join(control, "status");
  const pidFile = path.join(control, "pid");
  const job = [
    `${consentctlCommand(args)} 2>${quote(stderrFile)} & echo $! >${quote(pidFile)}`,
    `wait $!; echo $? >${quote(statusFile)}`,
  ].join("\n");
  const terminal = onTerminal(`stty cols 200 rows 24 && setsid -w sh -c ${quote(job)}`, env);
  const readOr = (file: string) => readFile(file, "utf8").catch(() => undefined);
  let stderr = "";
  const readStderr = async () => {
    stderr = (await readOr(stderrFile)) ?? stderr;
    return stderr;
  };
  const seen = () => `consentctl wrote to stderr: ${JSON.stringify(stderr)}`;
  return {
    waitForStderr: (test) =>
      pollFor(
        async () => {
          const text = await readStderr();
          return test(text) ? text : undefined;
        },
        "no such stderr",
        seen,
      ),
    close: terminal.hangUp,
    async ended() {
      try {
        const status = await pollFor(
          async () => {
            const text = await readOr(statusFile);
            return text?.endsWith("\n") ? Number(text) : undefined;
          },
          "no exit",
          seen,
        );
        return { code: status, stderr: await readStderr() };
      } catch (error) {
        const pid = Number(await readOr(pidFile));
        if (pid > 0) process.kill(pid, "SIGKILL");
        throw error;
      } finally {
        await rm(control, { recursive: true, force: true });
      }
    },
  };
}
