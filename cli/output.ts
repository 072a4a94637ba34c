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
 * it fails with EPIPE, an 'error' event that would end the process with a stack trace. The
 * output is only no longer wanted: the command ends quietly with the exit status it has (0 for
 * help), as `logs tail` and `logs export` do, whichever stream and writer (commander's help, JSON,
 * an Ink frame, an error message) met the closed pipe. Other write failures are not ours to
 * hide: they are thrown as they were, unless a command watches the stream for them itself.
 */
export function endQuietlyWhenReaderLeaves(io: Io): void {
  for (const stream of new Set([io.stdout, io.stderr])) {
    stream.on("error", (error) => {
      if (readerGone(error)) return;
      if (stream.listenerCount("error") === 1) throw error;
    });
  }
}

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
