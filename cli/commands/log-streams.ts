import { once } from "node:events";
import { type FileHandle, open, readlink, realpath, rename, rm, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Command, Option } from "commander";
import {
  createExportWriter,
  EXPORT_FORMATS,
  type ExportFormat,
  entryJson,
} from "#cli/commands/log-export-format.js";
import {
  addFilterOptions,
  addRangeOptions,
  filterRequest,
  LOGS_HINT,
  type LogFilterOptions,
  type LogRangeOptions,
} from "#cli/commands/log-filters.js";
import { fileFailure } from "#cli/file-errors.js";
import { counted, examples, jsonText } from "#cli/format.js";
import { nonEmpty } from "#cli/option-parsers.js";
import { type Io, writeJson } from "#cli/output.js";
import { UserError } from "#cli/problems.js";
import type { Runtime } from "#cli/program.js";
import {
  checkTerminalStillOpen,
  colorEnabled,
  frameColumns,
  liveTerminal,
  readerGone,
} from "#cli/terminal.js";

/**
 * Why a stream was stopped before its end: Ctrl-C (or SIGTERM, or the SIGHUP of its terminal
 * closing), the reader of stdout left (its terminal closed included), or the output could not be
 * written (a full disk).
 */
type Stop = { reason: "interrupted" | "reader_gone" } | { reason: "write_failed"; error: Error };

/** What a stream's body gets: the signal that stops it, why it stopped, and outputs to watch. */
interface Stopping {
  signal: AbortSignal;
  stopped(): Stop | undefined;
  /**
   * Stops the stream once `output` fails: a closed pipe (`… | head -n1`), a full disk, or a
   * terminal that was closed (checkTerminalStillOpen: within a second, whether rows come or not).
   */
  watch(output: NodeJS.WritableStream): void;
}

/**
 * Runs `body` with a signal that aborts once the command is interrupted (Ctrl-C, SIGTERM or SIGHUP,
 * caught from the command's start: `interrupted`, already aborted when it came early) or once an
 * output it watches fails. `stopped()` says why.
 */
async function untilStopped<T>(
  interrupted: AbortSignal,
  body: (stopping: Stopping) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  let stop: Stop | undefined;
  const end = (why: Stop) => {
    stop ??= why;
    abort.abort();
  };
  const interrupt = () => end({ reason: "interrupted" });
  const watched: (() => void)[] = [];
  if (interrupted.aborted) interrupt();
  else interrupted.addEventListener("abort", interrupt);
  try {
    return await body({
      signal: abort.signal,
      stopped: () => stop,
      watch(output) {
        const outputError = (error: Error) =>
          end(
            readerGone(error, output as { isTTY?: boolean })
              ? { reason: "reader_gone" }
              : { reason: "write_failed", error },
          );
        output.on("error", outputError);
        // A terminal closed under a quiet tail is found at once, not at the next row.
        const stopChecking = checkTerminalStillOpen(output as { isTTY?: boolean });
        watched.push(() => {
          stopChecking();
          output.off("error", outputError);
        });
      },
    });
  } finally {
    interrupted.removeEventListener("abort", interrupt);
    for (const unwatch of watched) unwatch();
  }
}

/**
 * A write failure of `where` as the operator's to fix, in words rather than Node's codes; `file`
 * is what was written when `where` is a link to it.
 */
function unwritable(where: string, error: Error, file = where): UserError {
  const { reason, hint } = fileFailure(
    file,
    error,
    "write",
    "check the disk's free space and the file's permissions",
  );
  return new UserError(`Cannot write ${where}: ${reason}.`, hint, "output_unwritable");
}

/**
 * Writes to a stream, waiting when it is full, so a slow pipe or disk never buffers everything;
 * a stop ends the wait.
 */
async function write(stream: NodeJS.WritableStream, text: string, signal: AbortSignal) {
  if (text && !stream.write(text)) await once(stream as NodeJS.EventEmitter, "drain", { signal });
}

export function addTailLogs(logs: Command, runtime: Runtime): void {
  addFilterOptions(
    logs
      .command("tail")
      .description(
        "follow new consent log rows live, one line each (JSON Lines with --json), until Ctrl-C",
      ),
  )
    .addHelpText(
      "after",
      examples(
        "consentctl logs tail --team TEAM_ID",
        "consentctl logs tail --team TEAM_ID --banner PUBLIC_ID --method accept_all --json | jq .consentId",
      ),
    )
    .action((options: LogFilterOptions, command: Command) =>
      runtime.stream(command, {
        auth: "operator",
        notFoundHint: LOGS_HINT,
        run: async ({ client, context }, io, interrupted) => {
          const views = context.json ? undefined : await import("#cli/views/log-views.js");
          // Laid out as `logs list` is at this terminal's width (cli/README.md, "Consent logs"),
          // read at each line: a terminal resized meanwhile gets lines of its new width.
          const printer = views?.createTailPrinter({
            color: colorEnabled(io.stdout, io.env),
            oneBanner: options.banner !== undefined,
          });
          const line = (entry: Parameters<typeof entryJson>[0]) =>
            printer ? printer(entry, frameColumns(io.stdout)) : `${jsonText(entryJson(entry))}\n`;
          // Ctrl-C is how a tail ends, at any moment (while --banner is checked too), and a
          // reader that has what it wanted may leave: both exit 0.
          return untilStopped(interrupted, async ({ signal, stopped, watch }) => {
            watch(io.stdout);
            let following = false;
            try {
              const { bannerId, methods, consentId } = await filterRequest(client, options, signal);
              const stream = client
                .logs(options.team, { untimed: true })
                .tailConsentLogs({ bannerId, methods, consentId }, { signal });
              for await (const response of stream) {
                if (!following && views) {
                  io.stderr.write("Following the consent log; press Ctrl-C to stop.\n");
                }
                following = true;
                for (const entry of response.entries) {
                  await write(io.stdout, line(entry), signal);
                }
              }
            } catch (error) {
              const stop = stopped();
              if (stop?.reason === "write_failed") throw unwritable("stdout", stop.error);
              if (stop) return 0;
              throw tailEnded(error) ?? error;
            }
            if (signal.aborted) return 0;
            throw tailEnded();
          });
        },
      }),
    );
}

/**
 * A tail the daemon's going away ended, as the operator reads it: ended by the daemon as it shut
 * down (with no error, or its "shutting down"), or cut (the daemon killed, the connection lost:
 * the stream reset with CANCEL, which is not the operator cancelling, since Ctrl-C stops first).
 * Undefined for any other failure.
 */
function tailEnded(error?: unknown): UserError | undefined {
  const failure = error === undefined ? undefined : ConnectError.from(error);
  const shutDown =
    failure === undefined ||
    (failure.code === Code.Unavailable && failure.rawMessage === "the daemon is shutting down");
  if (!shutDown && failure?.code !== Code.Canceled) return undefined;
  return new UserError(
    shutDown
      ? "The daemon ended the tail: it is shutting down."
      : "The tail's connection to the daemon was cut: the daemon stopped, or the network failed.",
    "run the command again once the daemon is back",
    "stream_ended",
  );
}

interface ExportOptions extends LogRangeOptions {
  format: ExportFormat;
  out?: string;
}

export function addExportLogs(logs: Command, runtime: Runtime): void {
  addRangeOptions(
    logs
      .command("export")
      .description(
        "export rows oldest first as JSON Lines or CSV, streamed, as proof of consent; progress on stderr",
      ),
  )
    .addOption(
      new Option("--format <format>", "jsonl or csv").choices(EXPORT_FORMATS).default("jsonl"),
    )
    .option(
      "--out <file>",
      "write to this file (replaced) instead of stdout",
      nonEmpty("the output file"),
    )
    .addHelpText(
      "after",
      examples(
        "consentctl logs export --team TEAM_ID --banner PUBLIC_ID --since 2026-01-01T00:00:00Z --format csv --out proof.csv",
        "consentctl logs export --team TEAM_ID --since 30d > proof.jsonl",
      ),
    )
    .action((options: ExportOptions, command: Command) => {
      const { json } = command.optsWithGlobals<{ json?: boolean }>();
      if (json && !options.out && options.format === "csv") {
        command.error(
          "error: --json without --out prints JSON Lines; drop --format csv or add --out FILE",
        );
      }
      return runtime.stream(command, {
        auth: "operator",
        notFoundHint: LOGS_HINT,
        run: async ({ client, context }, io, interrupted) => {
          const writer = createExportWriter(options.format);
          let file: ExportFile | undefined;
          let progress: ReturnType<typeof progressLine> | undefined;
          let rows = 0;
          // Ctrl-C fails an export at any moment, before a row is read too: exit 1, FILE as it was.
          const ended = await untilStopped(interrupted, async ({ signal, stopped, watch }) => {
            try {
              const request = await filterRequest(client, options, signal);
              file = options.out ? await openOutput(options.out) : undefined;
              const out = file?.stream ?? io.stdout;
              watch(out);
              progress = context.json ? undefined : progressLine(io, out);
              const stream = client
                .logs(options.team, { untimed: true })
                .exportConsentLogs(request, { signal });
              for await (const batch of stream) {
                // Counted once handed to the output: a stop while it drains has still sent them.
                rows += batch.entries.length;
                await write(out, writer.batch(batch.entries), signal);
                progress?.update(rows);
              }
              await write(out, writer.end(), signal);
              await file?.commit();
              return "complete" as const;
            } catch (error) {
              await file?.discard();
              const stop = stopped();
              if (stop?.reason === "write_failed") {
                throw unwritable(options.out ?? "stdout", stop.error);
              }
              if (stop) return stop.reason;
              throw error;
            }
          });
          // A reader that left has what it wanted (`… | head`); nothing more to say.
          if (ended === "reader_gone") return 0;
          if (ended === "interrupted") {
            progress?.done(`Stopped after ${counted(rows, "row")}.`);
            throw new UserError(
              options.out
                ? `The export was interrupted; ${options.out} was left as it was.`
                : "The export was interrupted; its output is incomplete.",
              "run the command again and let it finish",
              "interrupted",
            );
          }
          const where = options.out ?? "stdout";
          progress?.done(`Exported ${counted(rows, "row")} as ${options.format} to ${where}.`);
          if (context.json && options.out) {
            writeJson(io, { rows, format: options.format, out: options.out });
          }
          return 0;
        },
      });
    });
}

/** The permissions of an export file made anew: read and write for its owner only. */
const NEW_EXPORT_MODE = 0o600;

/** The export file being written, and its end: renamed into place, or removed. */
interface ExportFile {
  stream: NodeJS.WritableStream;
  commit(): Promise<void>;
  discard(): Promise<void>;
}

/**
 * The export file, written beside its path and renamed over it once the export is whole: a
 * failed or interrupted export leaves an existing file as it was, and never leaves a partial
 * one that looks like proof. A symbolic link is followed (the file it names is replaced, with
 * its permissions), and what is not a regular file (a FIFO, /dev/stdout) is written directly.
 * A path that cannot be written is the operator's to fix.
 */
async function openOutput(path: string): Promise<ExportFile> {
  // A link to a file not there yet names that file, as a shell's `>` writes it; the link stays.
  const target = await realpath(path).catch(async () => {
    const link = await readlink(path).catch(() => undefined);
    return link === undefined ? path : resolve(dirname(path), link);
  });
  const existing = await stat(target).catch(() => undefined);
  const direct = existing !== undefined && !existing.isFile();
  const partial = direct
    ? target
    : // A name of fixed length, so any file name (up to 255 bytes) leaves room for it.
      join(dirname(target), `.consent-export-${process.pid}.partial`);
  let handle: FileHandle;
  try {
    // A new file is the owner's alone, as the data directory and its backups are: the rows are
    // pseudonymous personal data (consentIds and choices). A file already there keeps its mode.
    handle = await open(partial, direct ? "w" : "wx", NEW_EXPORT_MODE);
    if (existing && !direct) await handle.chmod(existing.mode & 0o7777);
  } catch (error) {
    throw unwritable(path, error as Error, target);
  }
  const stream = handle.createWriteStream();
  const closed = () =>
    new Promise<void>((resolve, reject) => {
      if (stream.errored) return reject(stream.errored);
      if (stream.closed) return resolve();
      stream.end((error?: Error | null) => (error ? reject(error) : resolve()));
    });
  return {
    stream,
    async commit() {
      try {
        await closed();
        if (!direct) await rename(partial, target);
      } catch (error) {
        throw unwritable(path, error as Error);
      }
    },
    async discard() {
      if (!stream.closed) {
        stream.destroy();
        // Its write error, if that is why it is discarded, was reported already (untilStopped).
        await once(stream, "close").catch(() => {});
      }
      if (!direct) await rm(partial, { force: true });
    },
  };
}

/**
 * "Exporting… 1500 rows" on stderr: redrawn in place on a live terminal, one line per batch
 * otherwise. Rows printed on that same terminal (no --out, stdout not redirected) show their own
 * progress, and a line redrawn between them would run into them: then only the summary is said.
 */
function progressLine(io: Io, out: NodeJS.WritableStream) {
  const tty = liveTerminal(io.stderr, io.env);
  const dataOnTerminal = out === io.stdout && io.stdout.isTTY === true;
  return {
    update(rows: number) {
      if (dataOnTerminal) return;
      const line = `Exporting… ${counted(rows, "row")}`;
      io.stderr.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
    },
    done(summary: string) {
      io.stderr.write(tty ? `\r\x1b[2K${summary}\n` : `${summary}\n`);
    },
  };
}
