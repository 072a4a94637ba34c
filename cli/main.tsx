import { CommanderError } from "commander";
import { endQuietlyWhenReaderLeaves, type Io, outputFailed } from "#cli/output.js";
import { EXIT_USAGE } from "#cli/problems.js";
import { createProgram } from "#cli/program.js";
import type { Session } from "#cli/run-command.js";
import { letGoOfClosedTerminalsAtExit } from "#cli/terminal.js";

/** What the program's launcher (bin/consentctl.js) hands over. */
export interface Launch {
  /**
   * Called once the command has started (its action runs until its first wait): a signal the
   * launcher held while the CLI loaded is sent again then, to a command that ends on it in its
   * own way (`logs tail`, `logs export`) or, for any other, to end the process.
   */
  commandStarted?: () => void;
}

/**
 * Entry point of `consentctl` (bin/consentctl.js). Sets process.exitCode rather than calling
 * process.exit(), so piped stdout is always flushed: 0 on success, 1 when the command failed,
 * 2 when the command line itself was wrong.
 */
export async function main(
  argv: readonly string[],
  io: Io = processIo(),
  launch: Launch = {},
): Promise<number> {
  const session: Session = { exitCode: 0 };
  const json = argv.slice(2).includes("--json");
  endQuietlyWhenReaderLeaves(io, json);
  const program = createProgram(io, session, json);
  // commander parses and calls the action at once, within parseAsync(), before its first await.
  const parsed = program.parseAsync([...argv]);
  launch.commandStarted?.();
  try {
    await parsed;
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    // commander has already printed its message (help, or the parse error) on the right stream.
    // Help or the version asked for ends with 0 (`teams help create` included); a parse error,
    // or help shown because a command is missing, with EXIT_USAGE: a wrong command line.
    session.exitCode = error.exitCode === 0 ? 0 : EXIT_USAGE;
  }
  // Output that could not be written fails a command that otherwise succeeded.
  if (session.exitCode === 0 && outputFailed()) session.exitCode = 1;
  process.exitCode = session.exitCode;
  return session.exitCode;
}

/** The process's own streams; a terminal among them closed meanwhile is let go of at exit. */
function processIo(): Io {
  letGoOfClosedTerminalsAtExit();
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}
