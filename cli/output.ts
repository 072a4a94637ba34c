import { jsonText } from "#cli/format.js";
import { type Problem, stackOf } from "#cli/problems.js";
import { colorEnabled, PIPED_COLUMNS } from "#cli/terminal.js";

/** Streams and environment of one invocation, passed down so nothing reaches for globals. */
export interface Io {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
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
