import { once } from "node:events";
import { open } from "node:fs/promises";
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
import { examples, jsonText } from "#cli/format.js";
import { type Io, writeJson } from "#cli/output.js";
import { UserError } from "#cli/problems.js";
import type { Runtime } from "#cli/program.js";
import { colorEnabled } from "#cli/terminal.js";

/** Aborts on Ctrl-C (and SIGTERM) while `body` runs: how a tail is stopped. */
async function untilInterrupted<T>(body: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  try {
    return await body(abort.signal);
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
}

/** Writes to a stream, waiting when it is full, so a slow pipe or disk never buffers everything. */
async function write(stream: NodeJS.WritableStream, text: string): Promise<void> {
  if (text && !stream.write(text)) await once(stream, "drain");
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
        run: async ({ client, context }, io) => {
          const views = context.json ? undefined : await import("#cli/views/log-views.js");
          const color = colorEnabled(io.stdout, io.env);
          const line = (entry?: Parameters<typeof entryJson>[0]) =>
            views
              ? `${views.renderTailLine(entry, { color })}\n`
              : `${jsonText(entry && entryJson(entry))}\n`;
          return untilInterrupted(async (signal) => {
            const { bannerId, methods } = filterRequest(options);
            const stream = client
              .logs(options.team, { streaming: true })
              .tailConsentLogs({ bannerId, methods }, { signal });
            let following = false;
            try {
              for await (const response of stream) {
                if (!following && views) {
                  io.stderr.write("Following the consent log; press Ctrl-C to stop.\n");
                  await write(io.stdout, line());
                }
                following = true;
                for (const entry of response.entries) await write(io.stdout, line(entry));
              }
            } catch (error) {
              if (signal.aborted) return 0;
              throw error;
            }
            if (signal.aborted) return 0;
            throw new UserError(
              "The daemon ended the tail: it is shutting down.",
              "run the command again once the daemon is back",
              "stream_ended",
            );
          });
        },
      }),
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
    .option("--out <file>", "write to this file (replaced) instead of stdout")
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
        run: async ({ client, context }, io) => {
          const file = options.out ? await openOutput(options.out) : undefined;
          const out = file?.stream ?? io.stdout;
          const progress = context.json ? undefined : progressLine(io);
          const writer = createExportWriter(options.format);
          let rows = 0;
          try {
            const stream = client
              .logs(options.team, { streaming: true })
              .exportConsentLogs(filterRequest(options));
            for await (const batch of stream) {
              await write(out, writer.batch(batch.entries));
              rows += batch.entries.length;
              progress?.update(rows);
            }
            await write(out, writer.end());
          } finally {
            if (file) await file.close();
          }
          const where = options.out ?? "stdout";
          progress?.done(`Exported ${rows} rows as ${options.format} to ${where}.`);
          if (context.json && options.out) {
            writeJson(io, { rows, format: options.format, out: options.out });
          }
          return 0;
        },
      });
    });
}

/** Opens the export file for writing; a path that cannot be written is the operator's to fix. */
async function openOutput(path: string) {
  try {
    const handle = await open(path, "w");
    const stream = handle.createWriteStream();
    return {
      stream,
      close: () =>
        new Promise<void>((resolve, reject) =>
          stream.end((error?: Error | null) => (error ? reject(error) : resolve())),
        ),
    };
  } catch (error) {
    throw new UserError(
      `Cannot write ${path}: ${(error as Error).message}.`,
      "check that the directory exists and is writable",
      "output_unwritable",
    );
  }
}

/** "Exporting… 1500 rows" on stderr: redrawn in place on a terminal, one line per batch otherwise. */
function progressLine(io: Io) {
  const tty = io.stderr.isTTY === true;
  return {
    update(rows: number) {
      io.stderr.write(tty ? `\r\x1b[2KExporting… ${rows} rows` : `Exporting… ${rows} rows\n`);
    },
    done(summary: string) {
      io.stderr.write(tty ? `\r\x1b[2K${summary}\n` : `${summary}\n`);
    },
  };
}
