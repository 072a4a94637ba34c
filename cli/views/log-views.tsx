import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Box, renderToString, Text } from "ink";
import { CopyableAfter } from "#cli/components/copyable.js";
import { KeyValue } from "#cli/components/key-value.js";
import {
  type Column,
  cellText,
  GAP,
  RowBlock,
  streamWidths,
  Table,
  TableLine,
} from "#cli/components/table.js";
import { formatTime } from "#cli/format.js";
import { textWidth } from "#cli/text-width.js";
import { ColorProvider, type Tone } from "#cli/theme.js";
import { CONSENT_LOG_METHODS } from "#daemon/consent-log/consent-log-rules.js";
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

/** A UUID's width: a banner's public id, a consentId. */
const UUID_WIDTH = 36;

/**
 * The columns of a consent log row, shared by `logs list` (a table) and `logs tail` (lines),
 * with the widest value of each but ACCEPTED for the tail, which lays out before its rows come.
 */
export const LOG_COLUMNS: readonly Column<ConsentLogEntry>[] = [
  {
    header: "RECEIVED",
    value: (e) => formatTime(e.receivedAt),
    widest: textWidth(formatTime(timestampFromMs(0))),
  },
  {
    header: "METHOD",
    value: (e) => e.method,
    tone: methodTone,
    widest: Math.max(...CONSENT_LOG_METHODS.map(textWidth)),
  },
  { header: "BANNER", value: (e) => e.bannerId, copy: true, widest: UUID_WIDTH },
  { header: "CONSENT ID", value: (e) => e.consentId, copy: true, widest: UUID_WIDTH },
  // An ISO 3166-1 alpha-2 code, or "-": narrower than the header.
  { header: "COUNTRY", value: (e) => e.country ?? "-", widest: 2 },
  { header: "ACCEPTED", value: acceptedCategories, shrinks: true },
];

/**
 * The columns of `logs list` and `logs tail`: listed for one banner (`--banner`), without the
 * BANNER column, which would say the same on each row.
 */
export function logColumns(oneBanner: boolean): readonly Column<ConsentLogEntry>[] {
  return oneBanner ? LOG_COLUMNS.filter((c) => c.header !== "BANNER") : LOG_COLUMNS;
}

/**
 * A page of rows, newest first, and how to read the next one. Listed for one banner
 * (`--banner`), the rows leave out the BANNER column, which would say the same on each.
 */
export function LogPageView({ page, oneBanner = false }: { page: LogPage; oneBanner?: boolean }) {
  return (
    <Box flexDirection="column">
      <Table
        rows={page.entries}
        columns={logColumns(oneBanner)}
        empty="No consent log rows match. Widen the range with --since, or drop --banner / --method / --consent-id."
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

/** How `logs tail` lays out: its terminal's width (frameColumns), and whether it is for one banner. */
export interface TailLayout {
  columns: number;
  oneBanner: boolean;
}

/**
 * The widths of the tail's table at the terminal's width, by the rule of `logs list`'s table
 * (streamWidths: each column at its widest, ACCEPTED the rest of the line, cut to it). Undefined
 * where the terminal holds no table: each row is a block, as `logs list` prints it.
 */
function tailWidths(layout: TailLayout): number[] | undefined {
  return streamWidths(logColumns(layout.oneBanner), layout.columns);
}

/**
 * The widths of one tail line: the table's, ACCEPTED narrowed to what this line holds (its
 * header, or the row's categories), so a piped line is laid out at its own width.
 */
function lineWidths(
  columns: readonly Column<ConsentLogEntry>[],
  widths: readonly number[],
  entry?: ConsentLogEntry,
): number[] {
  return widths.map((width, i) => {
    const column = columns[i] as Column<ConsentLogEntry>;
    if (column.widest !== undefined) return width;
    return Math.min(width, textWidth(entry ? cellText(column, entry) : column.header));
  });
}

/**
 * One line of `logs tail` (the header line without an entry) at the line's `widths`, aligned as
 * `logs list`'s table is; without widths (no table fits), an entry's block of labelled lines.
 */
function TailLine(props: {
  entry?: ConsentLogEntry;
  layout: TailLayout;
  widths: readonly number[] | undefined;
}) {
  const { entry, layout, widths } = props;
  const columns = logColumns(layout.oneBanner);
  if (widths) return <TableLine columns={columns} widths={widths} row={entry} />;
  return entry ? <RowBlock columns={columns} row={entry} width={layout.columns} /> : null;
}

/**
 * A tail line (or the header line) as text to write as each row arrives, with its line break;
 * a block with a blank line after it, and no header where rows are blocks.
 */
export function renderTailLine(
  entry: ConsentLogEntry | undefined,
  options: { color: boolean } & TailLayout,
): string {
  return tailLineText(entry, options, tailWidths(options));
}

/** renderTailLine with the table's widths at `options.columns` (tailWidths) worked out already. */
function tailLineText(
  entry: ConsentLogEntry | undefined,
  options: { color: boolean } & TailLayout,
  table: readonly number[] | undefined,
): string {
  if (!table && !entry) return "";
  const widths = table && lineWidths(logColumns(options.oneBanner), table, entry);
  const text = renderToString(
    <ColorProvider color={options.color}>
      <TailLine entry={entry} layout={options} widths={widths} />
    </ColorProvider>,
    // A line at its own width: Ink lays out a grid as wide as `columns`, for every line.
    {
      columns: widths
        ? widths.reduce((total, width) => total + width + GAP, -GAP)
        : options.columns,
    },
  );
  return widths ? `${text}\n` : `${text}\n\n`;
}

/**
 * What `logs tail` writes for each row, laid out at the terminal's width when it is written
 * (cli/README.md, "Consent logs"): a table line, the header before it where table lines start
 * (the first row, or the first after rows printed as blocks, so no header is left above a
 * block), or a block. The table's widths are worked out once for each width the terminal has,
 * not for every line.
 */
export function createTailPrinter({ color, oneBanner }: { color: boolean; oneBanner: boolean }) {
  let table: { columns: number; widths: number[] | undefined } | undefined;
  let headed = false;
  return (entry: ConsentLogEntry, columns: number): string => {
    if (table?.columns !== columns) table = { columns, widths: tailWidths({ columns, oneBanner }) };
    const options = { color, columns, oneBanner };
    const header = table.widths && !headed ? tailLineText(undefined, options, table.widths) : "";
    headed = table.widths !== undefined;
    return header + tailLineText(entry, options, table.widths);
  };
}

export const logPageView =
  ({ oneBanner = false } = {}) =>
  (page: LogPage) => <LogPageView page={page} oneBanner={oneBanner} />;
export const logStatsView = () => (stats: LogStats) => <LogStatsView stats={stats} />;
