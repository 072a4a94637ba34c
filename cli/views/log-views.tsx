import { Box, renderToString, Text } from "ink";
import { CopyableAfter } from "#cli/components/copyable.js";
import { KeyValue } from "#cli/components/key-value.js";
import { type Column, Table } from "#cli/components/table.js";
import { formatTime, printable } from "#cli/format.js";
import { fitToWidth } from "#cli/text-width.js";
import { ColorProvider, type Tone, Toned } from "#cli/theme.js";
import type { ConsentLogEntry } from "#gen/consent/v1/consent_log_pb.js";

/** One page of `logs list`, with the token of the next page when there is one. */
export interface LogPage {
  entries: ConsentLogEntry[];
  nextPageToken: string;
}

/** `logs stats` as the CLI holds it: counts as numbers (the daemon sends int64). */
export interface LogStats {
  total: number;
  byMethod: Record<string, number>;
  byDay: { day: string; count: number }[];
  explicitChoices: number;
  optedIn: number;
  optInRate: number;
}

/** The categories a row accepted, e.g. "necessary, analytics"; "-" when none. */
export function acceptedCategories(entry: ConsentLogEntry): string {
  const accepted = Object.entries(entry.preferences)
    .filter(([, on]) => on)
    .map(([name]) => name);
  return accepted.length > 0 ? accepted.join(", ") : "-";
}

/** accept_all reads as a yes, accept_necessary as a no; the rest carry no tone. */
function methodTone(entry: ConsentLogEntry): Tone | undefined {
  if (entry.method === "accept_all") return "success";
  if (entry.method === "accept_necessary") return "warning";
  if (entry.method === "consent_default") return "muted";
  return undefined;
}

/** The columns of a consent log row, shared by `logs list` (a table) and `logs tail` (lines). */
export const LOG_COLUMNS: readonly Column<ConsentLogEntry>[] = [
  { header: "RECEIVED", value: (e) => formatTime(e.receivedAt) },
  { header: "METHOD", value: (e) => e.method, tone: methodTone },
  { header: "BANNER", value: (e) => e.bannerId, copy: true },
  { header: "CONSENT ID", value: (e) => e.consentId, copy: true },
  { header: "COUNTRY", value: (e) => e.country ?? "-" },
  { header: "ACCEPTED", value: acceptedCategories, shrinks: true },
];

/**
 * A page of rows, newest first, and how to read the next one. Listed for one banner
 * (`--banner`), the rows leave out the BANNER column, which would say the same on each.
 */
export function LogPageView({ page, oneBanner = false }: { page: LogPage; oneBanner?: boolean }) {
  return (
    <Box flexDirection="column">
      <Table
        rows={page.entries}
        columns={oneBanner ? LOG_COLUMNS.filter((c) => c.header !== "BANNER") : LOG_COLUMNS}
        empty="No consent log rows match. Widen the range with --since, or drop --banner / --method."
      />
      {page.nextPageToken ? (
        <CopyableAfter tone="muted" text="more rows: add --page-token" value={page.nextPageToken} />
      ) : null}
    </Box>
  );
}

/** Share as a percentage with one decimal ("66.7%"). */
export function formatRate(rate: number): string {
  return `${(rate * 100).toFixed(1)}%`;
}

/** Counts by method and by day, and the opt-in rate of explicit choices. */
export function LogStatsView({ stats }: { stats: LogStats }) {
  const methods = Object.entries(stats.byMethod).sort(([, a], [, b]) => b - a);
  return (
    <Box flexDirection="column">
      <KeyValue
        fields={[
          { label: "Rows", value: String(stats.total) },
          { label: "Explicit choices", value: String(stats.explicitChoices) },
          { label: "Opted in", value: String(stats.optedIn) },
          {
            label: "Opt-in rate",
            value: stats.explicitChoices > 0 ? formatRate(stats.optInRate) : "- (no choices)",
            tone: "accent",
          },
        ]}
      />
      <Text> </Text>
      <Table
        rows={methods}
        empty="No rows in this range."
        columns={[
          { header: "METHOD", value: ([method]) => method },
          { header: "ROWS", value: ([, count]) => String(count) },
        ]}
      />
      {stats.byDay.length > 0 ? <Text> </Text> : null}
      {stats.byDay.length > 0 ? (
        <Table
          rows={stats.byDay}
          empty=""
          columns={[
            { header: "DAY (UTC)", value: (d) => d.day },
            { header: "ROWS", value: (d) => String(d.count) },
          ]}
        />
      ) : null}
    </Box>
  );
}

/** Fixed widths of a tail line: a live stream cannot fit columns to rows it has not seen. */
const TAIL_WIDTHS = [20, 16, 36, 36, 7] as const;

/** One line of `logs tail`: the columns of LOG_COLUMNS at fixed widths, the last one free. */
export function TailLine({ entry, header }: { entry?: ConsentLogEntry; header?: boolean }) {
  return (
    <Text>
      {LOG_COLUMNS.map((column, i) => {
        const width = TAIL_WIDTHS[i];
        const text = header || !entry ? column.header : printable(column.value(entry));
        const cell = width === undefined ? text : `${fitToWidth(text, width)}  `;
        const tone = header ? "strong" : entry && column.tone?.(entry);
        return (
          <Toned key={column.header} tone={tone || undefined}>
            {cell}
          </Toned>
        );
      })}
    </Text>
  );
}

/** A tail line (or the header line) as text, for writing as each row arrives. */
export function renderTailLine(
  entry: ConsentLogEntry | undefined,
  options: { color: boolean },
): string {
  return renderToString(
    <ColorProvider color={options.color}>
      <TailLine entry={entry} header={entry === undefined} />
    </ColorProvider>,
    { columns: 1_000 },
  );
}

export const logPageView =
  ({ oneBanner = false } = {}) =>
  (page: LogPage) => <LogPageView page={page} oneBanner={oneBanner} />;
export const logStatsView = () => (stats: LogStats) => <LogStatsView stats={stats} />;
