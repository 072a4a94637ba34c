import type { JsonObject } from "@bufbuild/protobuf";
import { stringify } from "csv-stringify/sync";
import { jsonText, messageJson } from "#cli/format.js";
import { servicesOfMessage } from "#daemon/consent-log/service-names.js";
import { isoTime } from "#gateway/json.js";
import { type ConsentLogEntry, ConsentLogEntrySchema } from "#gen/consent/v1/consent_log_pb.js";

export const EXPORT_FORMATS = ["jsonl", "csv"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/**
 * A row as `--json` and JSON Lines print it: the proto JSON mapping, every field present
 * (messageJson), but `services` as spec 2.4 writes it (servicesOfMessage), as the CSV export does.
 */
export function entryJson(entry: ConsentLogEntry) {
  const json = messageJson(ConsentLogEntrySchema, entry) as JsonObject;
  // Replaced in place: the key keeps its position among the row's fields.
  json.services = servicesOfMessage(entry.services);
  return json;
}

/**
 * The CSV columns, in order: one per field of ConsentLogEntry, purpose choices flattened, the
 * services last, in one cell.
 */
const CSV_COLUMNS: readonly [header: string, value: (e: ConsentLogEntry) => unknown][] = [
  ["consentLogId", (e) => e.consentLogId],
  // Times as JSON Lines (messageJson) and REST write them, so both exports of a row agree.
  ["receivedAt", (e) => isoTime(e.receivedAt) ?? ""],
  ["occurredAt", (e) => isoTime(e.occurredAt) ?? ""],
  ["timestampClamped", (e) => e.timestampClamped],
  ["bannerId", (e) => e.bannerId],
  ["consentId", (e) => e.consentId],
  ["method", (e) => e.method],
  // The whole choice in one cell, as JSON: category names are free text and may hold commas.
  ["preferences", (e) => JSON.stringify(e.preferences)],
  ["revision", (e) => e.revision],
  ["languageCode", (e) => e.languageCode],
  ["country", (e) => e.country],
  ["region", (e) => e.region],
  ["matchedRuleId", (e) => e.matchedRuleId],
  ["gpc", (e) => e.gpc],
  ["saleSharing", (e) => e.purposeChoices?.saleSharing],
  ["targetedAdvertising", (e) => e.purposeChoices?.targetedAdvertising],
  ["sensitiveData", (e) => e.purposeChoices?.sensitiveData],
  ["profiling", (e) => e.purposeChoices?.profiling],
  ["pageUrl", (e) => e.pageUrl],
  // In one cell as spec 2.4 writes them, category name → service names; empty when none.
  [
    "services",
    (e) =>
      Object.keys(e.services).length > 0 ? JSON.stringify(servicesOfMessage(e.services)) : "",
  ],
];

/**
 * Writes batches of rows as JSON Lines or CSV. CSV goes through csv-stringify (RFC 4180 quoting)
 * with its formula escaping on: a visitor-supplied cell such as `=HYPERLINK(…)` is prefixed with
 * `'`, and a cell holding `;` is quoted, so opening the proof file in a spreadsheet never runs
 * one, whichever separator the spreadsheet reads. The header comes with the first
 * batch, or alone when there are no rows.
 */
export function createExportWriter(format: ExportFormat) {
  let headerWritten = false;
  return {
    batch(entries: readonly ConsentLogEntry[]): string {
      if (format === "jsonl") {
        return entries.map((entry) => `${jsonText(entryJson(entry))}\n`).join("");
      }
      const text = stringify(
        entries.map((entry) => CSV_COLUMNS.map(([, value]) => value(entry))),
        {
          header: !headerWritten,
          columns: CSV_COLUMNS.map(([header]) => header),
          cast: { boolean: (value) => String(value) },
          escape_formulas: true,
          // Quoted too: a cell holding `;`, which spreadsheets of many locales take for the
          // separator, so that no part of it after a `;` is read as a cell (and a formula).
          quoted_match: ";",
        },
      );
      headerWritten = true;
      return text;
    },
    /** What a run without rows still writes: the CSV header line, nothing for JSON Lines. */
    end(): string {
      if (format === "jsonl" || headerWritten) return "";
      headerWritten = true;
      return `${CSV_COLUMNS.map(([header]) => header).join(",")}\n`;
    },
  };
}
