import { fileFailure } from "#cli/file-errors.js";
import { jsonText } from "#cli/format.js";
import { type Problem, stackOf } from "#cli/problems.js";
import { colorEnabled, PIPED_COLUMNS, readerGone } from "#cli/terminal.js";

/** Streams and environment of one invocation, passed down so nothing reaches for globals. */
export interface Io {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
}

/**
 * A reader that leaves (`consentctl … --help | head -2`) closes the pipe, and the next write to
 * it fails with EPIPE, an 'error' event that would end the process with a stack trace; a closed
 * terminal fails it with EIO, as it fails the read of its width (terminal.ts readerGone). The
 * output is only no longer wanted: the command ends quietly with the exit status it has (0 for
 * help), as `logs tail` and `logs export` do, whichever stream and writer (commander's help, JSON,
 * an Ink frame, an error message) met the closed pipe. Any other failure to write stdout (a full
 * disk, `> /dev/full`) is the operator's to know: said once on stderr, as `logs export` says it
 * (`output_unwritable`, in JSON with --json), and the command exits 1 (see `outputFailed`). One
 * of stderr leaves nowhere to say it. A command that watches a stream itself reports its own.
 */
export function endQuietlyWhenReaderLeaves(io: Io, json: boolean): void {
  failed = false;
  for (const stream of new Set([io.stdout, io.stderr])) {
    stream.on("error", (error) => {
      if (readerGone(error, stream) || stream.listenerCount("error") > 1 || failed) return;
      failed = true;
      // A command that failed already (a usage error, 2) keeps its own status.
      if (!process.exitCode) process.exitCode = 1;
      if (stream !== io.stdout) return;
      const { reason, hint } = fileFailure(
        "stdout",
        error,
        "write",
        "check the disk's free space and where stdout goes",
      );
      const message = `Cannot write stdout: ${reason}.`;
      io.stderr.write(
        json
          ? `${jsonText({ error: message, code: "output_unwritable", hint })}\n`
          : `✖ ${message}\nhint: ${hint}\n`,
      );
    });
  }
}

let failed = false;

/** Whether writing stdout or stderr failed (not for a reader that left): the command failed. */
export const outputFailed = () => failed;

/**
 * `--json` output: exactly one JSON document on stdout and nothing else, so
 * `consentctl ... --json | jq` always parses.
 */
export function writeJson(io: Io, value: unknown): void {
  io.stdout.write(`${jsonText(value, 2)}\n`);
}

export interface ReportOptions {
  json: boolean;
  debug: boolean;
}

/**
 * The single place failures are printed, always on stderr so stdout stays clean: a JSON object
 * `{ error, code, hint?, details? }` with --json, else a sentence, the violated rules and a hint.
 * Stacks appear only with --debug. Ink is loaded only for the human form.
 */
export async function reportProblem(
  io: Io,
  problem: Problem,
  options: ReportOptions,
): Promise<void> {
  if (options.json) {
    const body = {
      error: problem.message,
      code: problem.code,
      ...(problem.hint ? { hint: problem.hint } : {}),
      ...(problem.details.length > 0 ? { details: problem.details } : {}),
      ...(options.debug ? { stack: stackOf(problem.cause) } : {}),
    };
    io.stderr.write(`${jsonText(body)}\n`);
    return;
  }
  const { renderProblem } = await import("#cli/components/error-message.js");
  const text = renderProblem(problem, {
    color: colorEnabled(io.stderr, io.env),
    columns: io.stderr.isTTY ? io.stderr.columns || 80 : PIPED_COLUMNS,
    debug: options.debug,
  });
  io.stderr.write(`${text}\n`);
}
