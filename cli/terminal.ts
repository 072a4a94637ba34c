import { closeSync, fstatSync } from "node:fs";
import { isatty } from "node:tty";
import { useStdout } from "ink";
import { createContext, useContext } from "react";

/**
 * Width piped output is laid out within: wide enough that no line is ever wrapped or cut. Ink
 * is then given only the columns the frame's widest line needs (lifecycle.tsx pipedFrameColumns).
 */
export const PIPED_COLUMNS = 10_000;

/**
 * Whether `stream` failed because its reader went away: the reader of the pipe
 * (`consentctl … | head -n1`: EPIPE), or the terminal, closed while consentctl ran (its window,
 * an ssh connection, a job left running: the terminal hung up, and every write and every read of
 * its size fails with EIO). The output is no longer wanted, which is no failure of the command.
 */
export function readerGone(error: unknown, stream: { isTTY?: boolean }): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === "EPIPE" || (code === "EIO" && stream.isTTY === true);
}

let lettingGoOfClosedTerminals = false;

/**
 * Lets the process end with its own exit status after its terminal was closed. Node 20 restores
 * the settings of each stdio descriptor that was a terminal at its start as it exits, and aborts
 * (exit 134, a native stack trace on stderr) when that fails because the terminal has hung up
 * (nodejs/node#51519). It leaves a descriptor closed by then alone: at exit, each one whose
 * terminal is gone (no longer a terminal, still open) is closed. Once per process.
 */
export function letGoOfClosedTerminalsAtExit(): void {
  if (lettingGoOfClosedTerminals) return;
  lettingGoOfClosedTerminals = true;
  const terminals = [0, 1, 2].filter((fd) => isatty(fd));
  process.once("exit", () => {
    for (const fd of terminals) if (!isatty(fd) && isOpen(fd)) closeSync(fd);
  });
}

/**
 * Whether the descriptor `fd` is open, as far as `fstat` can tell: one it cannot read (EBADF, or
 * any other failure) is left alone, as a throw here, in the exit handler, would replace the
 * command's exit status with a crash.
 */
function isOpen(fd: number): boolean {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
}

/**
 * Colours only on a terminal, never with NO_COLOR (no-color.org) or TERM=dumb. Views read this
 * decision rather than chalk's, which looks at stdout alone and ignores NO_COLOR.
 */
export function colorEnabled(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.TERM === "dumb") return false;
  return stream.isTTY === true;
}

/**
 * Rows a terminal needs for the spinner. Ink clears the screen and its scrollback before drawing a
 * frame as tall as the terminal, and a pseudo-terminal of no known size (`script` run without a
 * terminal, some `docker exec -t` and CI ptys) reports 0 rows: there even a one-line spinner
 * would wipe the operator's screen.
 */
const SPINNER_MIN_ROWS = 3;

/**
 * A spinner and cursor control only on a terminal that takes them: a TTY of at least
 * SPINNER_MIN_ROWS rows (a stand-in that reports no size at all counts as large enough), not
 * TERM=dumb, and not in CI (Ink's own rule, is-in-ci: it draws no frames there). Anywhere else the
 * output is the final frame alone, written once.
 */
export function liveTerminal(
  stream: { isTTY?: boolean; rows?: number },
  env: NodeJS.ProcessEnv,
): boolean {
  if (env.TERM === "dumb") return false;
  const set = (name: string) =>
    env[name] !== undefined && env[name] !== "0" && env[name] !== "false";
  if (set("CI") || set("CONTINUOUS_INTEGRATION")) return false;
  return stream.isTTY === true && (stream.rows ?? SPINNER_MIN_ROWS) >= SPINNER_MIN_ROWS;
}

/**
 * Width the final frame is laid out to: the terminal's (tables are fitted to it, TERM=dumb
 * included), or PIPED_COLUMNS when piped, so that no line is cut. The terminal's width is asked
 * of the terminal now: Node updates `columns` only once it has handled the resize's SIGWINCH,
 * which a busy process may do after printing a line that arrived at the same moment (a
 * `logs tail` row laid out for the width before the resize).
 */
export function frameColumns(stream: TerminalStream): number {
  if (stream.isTTY !== true) return PIPED_COLUMNS;
  askTerminalSize(stream);
  return stream.columns || UNKNOWN_COLUMNS;
}

/**
 * Asks a terminal its size through tty.WriteStream's own refresh (one ioctl), the one Node's
 * SIGWINCH handler calls: it emits `resize` when the size changed, as the handler would have,
 * and `error` (EIO) once the terminal is closed, which the stream's watchers read as its reader
 * gone (readerGone).
 */
function askTerminalSize(stream: TerminalStream): void {
  stream._refreshSize?.();
}

/** How often a command that waits on a terminal asks whether it is still there. */
const TERMINAL_CHECK_MS = 1_000;

/**
 * Finds a terminal closed under a command that writes to it only now and then (`logs tail` on
 * a quiet log) within TERMINAL_CHECK_MS, as an `error` (EIO) on `stream`. A process the
 * hang-up sends no SIGHUP (a job left running: `disown`, `setsid`) learns of it only from its own
 * use of the terminal, and a write may be hours away; asking the terminal its size every second
 * costs one ioctl and is allowed to a background job, which a read of the terminal is not.
 * Returns the function that stops the checks (none for a stream that is no terminal); the timer
 * never keeps the process alive.
 */
export function checkTerminalStillOpen(stream: TerminalStream): () => void {
  if (stream.isTTY !== true) return () => {};
  const timer = setInterval(() => askTerminalSize(stream), TERMINAL_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** An output stream as frameColumns reads it; a terminal's has Node's size refresh. */
interface TerminalStream {
  isTTY?: boolean;
  columns?: number;
  _refreshSize?: () => void;
}

/** The width a terminal that does not say its own is taken to have. */
const UNKNOWN_COLUMNS = 80;

const FrameColumnsContext = createContext<number | undefined>(undefined);

/**
 * The width a final frame is laid out to (lifecycle.tsx), for the views under it: Ink's
 * renderToString, which lays it out, gives its views no stdout of that width.
 */
export const FrameColumns = FrameColumnsContext.Provider;

/**
 * The columns a component lays itself out in: `width` when its caller gives one (a test, a tail
 * line), else the final frame's (FrameColumns), else Ink's output's, else UNKNOWN_COLUMNS.
 */
export function useColumns(width?: number): number {
  const frame = useContext(FrameColumnsContext);
  const { stdout } = useStdout();
  return width ?? frame ?? (stdout.columns || UNKNOWN_COLUMNS);
}
