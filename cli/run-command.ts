import type { Command } from "commander";
import type { ReactNode } from "react";
import {
  type CommandContext,
  findOperatorToken,
  type GlobalOptions,
  type OperatorToken,
  requireOperatorToken,
  resolveContext,
} from "#cli/context.js";
import { createDaemonClient, type DaemonClient } from "#cli/daemon-client.js";
import { refuseCredential } from "#cli/option-parsers.js";
import { type Io, reportProblem, writeJson } from "#cli/output.js";
import { describeProblem, EXIT_FAILURE } from "#cli/problems.js";
import { colorEnabled, liveTerminal } from "#cli/terminal.js";
import { ConfigError } from "#daemon/config.js";

/** Everything a command needs once its arguments are parsed. */
export interface Invocation {
  client: DaemonClient;
  context: CommandContext;
  /** Unset only for commands declared `auth: "none"` or `"optional"` without a token. */
  token: OperatorToken | undefined;
}

/**
 * A command: its daemon call(s), its JSON form and its view. Commands declare these and the
 * runner does the rest, so every command gets the same --json, spinner, error and exit rules.
 */
export interface CommandSpec<T> {
  /** Spinner label ("Creating team…"). */
  progress: string;
  /** operator: refuse to start without a token; optional: use one if found; none: never send one. */
  auth: "operator" | "optional" | "none";
  /** doctor only: run even when the environment does not parse, to report it. */
  diagnoses?: boolean;
  call(invocation: Invocation): Promise<T>;
  json(value: T): unknown;
  /**
   * Loads the command's view. A loader rather than the view itself: Ink and the views are
   * imported only for human output, so `--json` (scripts, tests) starts in half the time.
   */
  view(): Promise<(value: T) => ReactNode>;
  exitCode?(value: T): number;
  /**
   * What the operator should know of a result that succeeded (a write is kept; the operator
   * decides): a line each on stderr after the output, so stdout holds the output alone. With
   * --json the command's `json` carries them instead (a `warnings` array).
   */
  warnings?(value: T): string[];
  /** Where to look up the right id when the daemon answers not_found. */
  notFoundHint?: string;
}

/** Exit status the program ends with; main() hands it to the process. */
export interface Session {
  exitCode: number;
}

/**
 * A command whose answer is a stream (logs tail, logs export): it writes its own output as the
 * rows arrive and returns its exit status; the runner supplies settings, token, client and the
 * one error printer, as for every other command. `interrupted` aborts on Ctrl-C (or SIGTERM,
 * or SIGHUP) at any moment from the command's start, which the stream reads as its own way to
 * end.
 */
export interface StreamCommandSpec {
  auth: "operator";
  run(invocation: Invocation, io: Io, interrupted: AbortSignal): Promise<number>;
  notFoundHint?: string;
}

/** Runs one command to completion: resolve settings, call the daemon, print, decide the exit. */
export async function runCommand<T>(
  command: Command,
  spec: CommandSpec<T>,
  io: Io,
  session: Session,
): Promise<void> {
  await withInvocation(command, spec, io, session, (invocation) => present(spec, invocation, io));
}

/**
 * Runs a streaming command under the same settings, token and error rules as runCommand. Ctrl-C
 * (or SIGTERM) is caught from the start, before the token is read or the stream asked for, so
 * a tail stopped at once ends as one stopped later does, never killed by the signal. A second
 * one, while the stream winds down, ends the process. SIGHUP, which the terminal's closing
 * sends the process in its foreground, stops the stream likewise, rather than ending the process
 * by the signal with its stream cut: the output is no longer wanted (cli/README.md, "Consent
 * logs"). A second SIGHUP changes nothing: one closing can send more than one (an interactive
 * shell passes its own on to its jobs, and the kernel signals the foreground as the shell ends).
 */
export async function runStreamCommand(
  command: Command,
  spec: StreamCommandSpec,
  io: Io,
  session: Session,
): Promise<void> {
  const interrupts = new AbortController();
  const interrupt = () => interrupts.abort();
  process.once("SIGINT", interrupt);
  process.once("SIGTERM", interrupt);
  process.on("SIGHUP", interrupt);
  try {
    await withInvocation(command, spec, io, session, (invocation) =>
      spec.run(invocation, io, interrupts.signal),
    );
  } finally {
    process.off("SIGINT", interrupt);
    process.off("SIGTERM", interrupt);
    process.off("SIGHUP", interrupt);
  }
}

/** Resolves settings, token and client, runs `body`, and reports any failure (exit 1). */
async function withInvocation(
  command: Command,
  spec: Pick<CommandSpec<unknown>, "auth" | "diagnoses" | "notFoundHint">,
  io: Io,
  session: Session,
  body: (invocation: Invocation) => Promise<number>,
): Promise<void> {
  // A credential given where an id belongs would be sent, and printed back in "No … with id …".
  const local = command.opts<Record<string, unknown>>();
  const ids = [local.team, local.banner, local.banners].flat().filter((v) => typeof v === "string");
  const hint = spec.notFoundHint ?? "give the id a list command shows (`consentctl teams list`)";
  for (const id of [...command.args, ...ids]) refuseCredential(command, id, hint);
  const globals = command.optsWithGlobals<GlobalOptions>();
  const context = resolveContext(globals, io.env);
  let token: OperatorToken | undefined;
  let client: DaemonClient | undefined;
  try {
    if (context.config instanceof ConfigError && !spec.diagnoses) throw context.config;
    token = await resolveToken(spec, globals, context);
    client = createDaemonClient({
      url: context.daemonUrl,
      token: token?.token,
      log: context.debug ? (line) => console.error(line) : undefined,
    });
    const invocation: Invocation = { client, context, token };
    session.exitCode = await body(invocation);
  } catch (error) {
    const problem = describeProblem(error, {
      daemonUrl: context.daemonUrl,
      tokenSource: token?.source,
    });
    if (problem.code === "not_found") problem.hint ??= spec.notFoundHint;
    await reportProblem(io, problem, { json: context.json, debug: context.debug });
    session.exitCode = EXIT_FAILURE;
  } finally {
    client?.close();
  }
}

async function resolveToken(
  spec: Pick<CommandSpec<unknown>, "auth">,
  globals: GlobalOptions,
  context: CommandContext,
): Promise<OperatorToken | undefined> {
  if (spec.auth === "operator") return requireOperatorToken(globals, context);
  if (spec.auth === "optional") return findOperatorToken(globals, context);
  return undefined;
}

/** JSON straight to stdout; human output through the Ink lifecycle root. Failures are thrown. */
async function present<T>(spec: CommandSpec<T>, invocation: Invocation, io: Io): Promise<number> {
  let warnings: string[] = [];
  const task = async () => {
    const value = await spec.call(invocation);
    warnings = spec.warnings?.(value) ?? [];
    return value;
  };
  if (invocation.context.json) {
    const value = await task();
    writeJson(io, spec.json(value));
    return spec.exitCode?.(value) ?? 0;
  }
  const [{ renderCommand }, view] = await Promise.all([import("#cli/lifecycle.js"), spec.view()]);
  // A spinner only on a live terminal (not piped, not TERM=dumb); the final frame is written
  // once in every case, fitted to the terminal's width or, piped, never cut.
  const outcome = await renderCommand(
    { task, progress: spec.progress, view, exitCode: spec.exitCode },
    {
      stdout: io.stdout,
      stderr: io.stderr,
      color: colorEnabled(io.stdout, io.env),
      live: liveTerminal(io.stdout, io.env),
    },
  );
  if (!outcome.ok) throw outcome.error;
  for (const warning of warnings) io.stderr.write(`warning: ${warning}\n`);
  return outcome.exitCode;
}
