import { render, useApp } from "ink";
import { type ReactNode, useEffect, useState } from "react";
import { Spinner } from "#cli/components/spinner.js";
import { ColorProvider } from "#cli/theme.js";

/** A task's result once known: the value, or what it threw. */
export type Settled<T> = { status: "done"; value: T } | { status: "failed"; error: unknown };

/** How a command ended: an exit status, or the failure for the one error printer to report. */
export type CommandOutcome = { ok: true; exitCode: number } | { ok: false; error: unknown };

export interface CommandRootProps<T> {
  /** The daemon call(s); started once when the root mounts, unless `settled` is given. */
  task: () => Promise<T>;
  /** A result already known (piped output: no spinner frame is ever written). */
  settled?: Settled<T>;
  /** Spinner label while the task runs. */
  progress: string;
  /** The command's view of its result. */
  view: (value: T) => ReactNode;
  /** Exit status for a result (health and doctor fail with 1 on a bad report); default 0. */
  exitCode?: (value: T) => number;
}

/** Runs a promise to completion, never rejecting. */
export async function settle<T>(task: () => Promise<T>): Promise<Settled<T>> {
  try {
    return { status: "done", value: await task() };
  } catch (error) {
    return { status: "failed", error };
  }
}

/**
 * The one lifecycle root (cli-kit pattern): shows a spinner while the task runs, then the result,
 * and calls exit() from an effect, i.e. after the final frame has been committed. A failure
 * clears the spinner and leaves through exit() too; the caller prints it on stderr.
 */
export function CommandRoot<T>({ task, settled, progress, view, exitCode }: CommandRootProps<T>) {
  const { exit } = useApp();
  const [state, setState] = useState<Settled<T> | undefined>(settled);
  useEffect(() => {
    if (settled) return;
    let mounted = true;
    void settle(task).then((result) => {
      if (mounted) setState(result);
    });
    return () => {
      mounted = false;
    };
  }, [settled, task]);
  useEffect(() => {
    if (!state) return;
    const outcome: CommandOutcome =
      state.status === "done"
        ? { ok: true, exitCode: exitCode?.(state.value) ?? 0 }
        : { ok: false, error: state.error };
    exit(outcome);
  }, [state, exit, exitCode]);
  if (!state) return <Spinner label={progress} />;
  return state.status === "done" ? view(state.value) : null;
}

export interface RenderOptions {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  color: boolean;
  /** Route console output (the --debug call log) around Ink's frames; default true. */
  patchConsole?: boolean;
}

/** Mounts a CommandRoot with Ink and resolves with its outcome once it has exited. */
export async function renderCommand<T>(
  props: CommandRootProps<T>,
  options: RenderOptions,
): Promise<CommandOutcome> {
  const instance = render(
    <ColorProvider color={options.color}>
      <CommandRoot {...props} />
    </ColorProvider>,
    {
      stdout: options.stdout,
      stderr: options.stderr,
      exitOnCtrlC: true,
      patchConsole: options.patchConsole ?? true,
    },
  );
  return (await instance.waitUntilExit()) as CommandOutcome;
}
