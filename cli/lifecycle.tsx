import { Box, type DOMElement, measureElement, render, renderToString } from "ink";
import { type ReactNode, useLayoutEffect, useRef } from "react";
import { Spinner } from "#cli/components/spinner.js";
import { FrameColumns, frameColumns } from "#cli/terminal.js";
import { ColorProvider } from "#cli/theme.js";
import { STOP_SIGNALS } from "#daemon/drain-exit.js";

/** A task's result once known: the value, or what it threw. */
export type Settled<T> = { status: "done"; value: T } | { status: "failed"; error: unknown };

/** How a command ended: an exit status, or the failure for the one error printer to report. */
export type CommandOutcome = { ok: true; exitCode: number } | { ok: false; error: unknown };

export interface CommandProps<T> {
  /** The daemon call(s); started once. */
  task: () => Promise<T>;
  /** Spinner label while the task runs (on a live terminal only). */
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

export interface RenderOptions {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  color: boolean;
  /** Animate a spinner on `stdout` while the task runs (terminal.ts liveTerminal); default false. */
  live?: boolean;
  /** Width the final frame is laid out to; default terminal.ts frameColumns(stdout). */
  columns?: number;
  /** Route console output (the --debug call log) around the spinner's frames; default true. */
  patchConsole?: boolean;
}

/**
 * Runs a command's task and writes its final frame (cli-kit pattern, in two steps):
 *
 * 1. On a live terminal only, a spinner while the task runs, redrawn in place by Ink. Once the
 *    task has settled the spinner is erased and its Ink instance unmounted.
 * 2. The result's view, laid out by Ink once (renderToString, at the terminal's width on a
 *    terminal) and written as it is, with its line break, where the spinner was. Nothing ever
 *    erases or redraws it, so Ink never takes its "fullscreen" path (clear screen and
 *    scrollback, then draw again) for a frame as tall as the terminal, whatever its height.
 *    Piped, the frame is laid out at the width its widest line needs (pipedFrameColumns).
 *
 * The final frame is no live Ink instance: one would draw it twice (at its commit, and again as
 * it unmounts), and Ink spends some microseconds on each character of a frame it draws (a grid
 * of cells, each character tokenized and styled): a thousand-row `logs list` is 150,000 of them.
 *
 * A failure is handed back (no frame is written); the caller prints it on stderr. A stop signal
 * meanwhile ends the process by that signal (endingBySignal).
 */
export function renderCommand<T>(
  props: CommandProps<T>,
  options: RenderOptions,
): Promise<CommandOutcome> {
  return endingBySignal(() => drawCommand(props, options));
}

/**
 * Runs `draw` (the command's Ink instances) under a listener that ends the process by a stop
 * signal that comes meanwhile, as one does at any other moment of a command (cli/README.md,
 * "Output contract"). Without it, a Ctrl-C while Ink drew a frame was lost and the command exited
 * 0: Node hands a signal to its listeners from the event loop, and Ink's own (signal-exit's),
 * there when it came, was gone by then, removed as the instance unmounted at the end of the
 * same synchronous render. The listener hands the signal to the listeners still there (Ink's
 * unmount, the cursor shown again), then ends the process by it; it is removed only once the
 * event loop has polled after `draw`, so a signal that came during the last frame reaches it.
 */
async function endingBySignal<T>(draw: () => Promise<T>): Promise<T> {
  const end = (signal: NodeJS.Signals) => {
    for (const stop of STOP_SIGNALS) process.off(stop, end);
    process.emit(signal, signal);
    process.kill(process.pid, signal);
  };
  for (const stop of STOP_SIGNALS) process.on(stop, end);
  try {
    return await draw();
  } finally {
    // Two turns: the first may run in the check phase of the poll that preceded the signal.
    for (let turn = 0; turn < 2; turn += 1) await new Promise((resolve) => setImmediate(resolve));
    for (const stop of STOP_SIGNALS) process.off(stop, end);
  }
}

async function drawCommand<T>(
  props: CommandProps<T>,
  options: RenderOptions,
): Promise<CommandOutcome> {
  const settled = options.live
    ? await withSpinner(props.task, props.progress, options)
    : await settle(props.task);
  if (settled.status === "failed") return { ok: false, error: settled.error };
  const { value } = settled;
  const content = <ColorProvider color={options.color}>{props.view(value)}</ColorProvider>;
  const columns = options.columns ?? frameColumns(options.stdout);
  const width = options.stdout.isTTY ? columns : pipedFrameColumns(content, columns);
  const frame = renderToString(<FrameColumns value={width}>{content}</FrameColumns>, {
    columns: width,
  });
  // A failed write is stdout's to report (its 'error' event: output.ts
  // endQuietlyWhenReaderLeaves), as any other write of the command's.
  options.stdout.write(`${frame}\n`);
  return { ok: true, exitCode: props.exitCode?.(value) ?? 0 };
}

/**
 * The columns a piped frame needs: the width of its widest line laid out at `limit` columns, at
 * most `limit` (PIPED_COLUMNS). Ink draws a frame on a grid of cells as wide as it is given, for
 * every line: at PIPED_COLUMNS a thousand-row `logs list` took ten million cells (gigabytes,
 * seconds). At the width its widest line needs the frame is the same text, since the views lay
 * out alike at any width their content fits (a table at its natural widths, a record aligned, no
 * text wrapped), and costs what it holds.
 */
function pipedFrameColumns(content: ReactNode, limit: number): number {
  let width = 0;
  renderToString(
    <FrameColumns value={limit}>
      <ContentWidth onWidth={(measured) => (width = measured)}>{content}</ContentWidth>
    </FrameColumns>,
    { columns: limit },
  );
  // An empty frame has one column, as a terminal's narrowest.
  return Math.max(1, Math.min(limit, width));
}

/**
 * Lays its content out at the width it needs (a flex item that neither grows nor shrinks: its
 * widest line) under a box of no height, which Ink draws as no lines, and hands that width on
 * once it is laid out (Ink lays the frame out as it commits, before layout effects run). The box
 * does not clip: Ink passes over a line outside its frame at once, where it would cut each line
 * to a clip.
 */
function ContentWidth({
  children,
  onWidth,
}: {
  children: ReactNode;
  onWidth: (width: number) => void;
}) {
  const content = useRef<DOMElement>(null);
  useLayoutEffect(() => {
    onWidth(content.current ? measureElement(content.current).width : 0);
  }, [onWidth]);
  return (
    <Box height={0}>
      <Box ref={content} flexDirection="column" flexShrink={0}>
        {children}
      </Box>
    </Box>
  );
}

/**
 * Shows the spinner on the terminal until the task settles, then erases it (Ink's clear(): the
 * spinner's own lines, no blank line left behind, unlike rendering nothing) and unmounts, so the
 * final frame is written where the spinner was. clear() must find no redraw pending, or unmount
 * would draw the spinner again: the task runs outside React, so settling re-renders nothing, and
 * the spinner's frames (80 ms apart) are each drawn at once under Ink's 30 fps throttle.
 */
async function withSpinner<T>(
  task: () => Promise<T>,
  label: string,
  options: RenderOptions,
): Promise<Settled<T>> {
  const instance = render(
    <ColorProvider color={options.color}>
      <Spinner label={label} />
    </ColorProvider>,
    {
      stdout: options.stdout,
      stderr: options.stderr,
      exitOnCtrlC: true,
      patchConsole: options.patchConsole ?? true,
    },
  );
  const exited = instance.waitUntilExit();
  const settled = await settle(task);
  instance.clear();
  instance.unmount();
  await exited;
  return settled;
}
