import { Box, Text, useStdout } from "ink";
import type { ReactNode } from "react";
import { KeyValue } from "#cli/components/key-value.js";
import { printable } from "#cli/format.js";
import { cutToWidth, textWidth } from "#cli/text-width.js";
import { type Tone, Toned } from "#cli/theme.js";

/**
 * One column: its header, how a row shows in it, and optionally a tone per row. A column is shown
 * whole (an id, a status, a plan, a time, a count: short values of a fixed form that say nothing
 * once cut) unless it `shrinks`.
 */
export interface Column<Row> {
  header: string;
  value: (row: Row) => string;
  tone?: (row: Row) => Tone | undefined;
  /**
   * Free text that may be cut to fit (a name, a domain, a URL, a list, an error), to no fewer
   * than SHRUNK_WIDTH columns and never shorter than its header.
   */
  shrinks?: boolean;
  /**
   * A value the operator copies (an id into the next command, a URL): whole in the blocks as
   * well, however narrow the terminal (KeyValue's `copy`).
   */
  copy?: boolean;
}

export interface TableProps<Row> {
  columns: readonly Column<Row>[];
  rows: readonly Row[];
  /** Printed instead of an empty table ("No teams yet."). */
  empty: string;
  /** Width to fit; defaults to the terminal's. */
  width?: number;
}

const GAP = 2;
/**
 * The fewest columns a cell that `shrinks` is cut to: nine characters and "…", enough to tell
 * one name from another. Shorter than that a table says less than the blocks do.
 */
export const SHRUNK_WIDTH = 10;

/**
 * Column widths that fit `available` columns: when the natural widths are too wide, the widest
 * columns give way first, none below its `minimum` (a column whose minimum is its natural width
 * keeps it). Undefined when no widths fit: the minimums and the gaps between them are already
 * wider than `available`.
 */
export function fitColumns(
  natural: readonly number[],
  minimum: readonly number[],
  available: number,
  gap = GAP,
): number[] | undefined {
  const budget = available - gap * Math.max(0, natural.length - 1);
  const sum = (widths: readonly number[]) => widths.reduce((total, width) => total + width, 0);
  const floor = natural.map((width, i) => Math.min(width, minimum[i] ?? width));
  const capped = (cap: number) =>
    natural.map((width, i) => Math.max(floor[i] as number, Math.min(width, cap)));
  if (sum(natural) <= budget) return [...natural];
  if (sum(floor) > budget) return undefined;
  let cap = Math.max(...natural);
  while (sum(capped(cap)) > budget) cap--;
  const widths = capped(cap);
  // Hand the columns the last step freed back to the columns that were cut.
  let spare = budget - sum(widths);
  for (let i = 0; i < widths.length && spare > 0; i++) {
    if ((natural[i] as number) > (widths[i] as number)) {
      widths[i] = (widths[i] as number) + 1;
      spare--;
    }
  }
  return widths;
}

/**
 * Rows as a table fitted to the terminal width; long free text ends in "…". Widths are terminal
 * columns (a CJK character or an emoji takes two), and a cell is cut to its column between
 * graphemes, so the columns line up and keep their two spaces whatever the text. A table is
 * printed only where every header is whole, every column but those that `shrinks` is whole and
 * those keep SHRUNK_WIDTH columns; on a narrower terminal (an id alone fills 36), one block of
 * "HEADER: value" lines per row instead: a table squeezed further says "pendi…" and "2026-…".
 */
export function Table<Row>({ columns, rows, empty, width }: TableProps<Row>) {
  const { stdout } = useStdout();
  if (rows.length === 0) return <Toned tone="muted">{empty}</Toned>;
  const available = width ?? (stdout.columns || 80);
  const cells = rows.map((row) => columns.map((column) => printable(column.value(row))));
  const natural = columns.map((column, i) =>
    Math.max(textWidth(column.header), ...cells.map((line) => textWidth(line[i] ?? ""))),
  );
  const minimum = columns.map((column, i) =>
    column.shrinks ? Math.max(textWidth(column.header), SHRUNK_WIDTH) : (natural[i] as number),
  );
  const widths = fitColumns(natural, minimum, available);
  if (!widths) return <Records columns={columns} rows={rows} width={available} />;
  // Cells are cut here, to their column's width (Ink's truncate-end can leave a wide character
  // straddling the column's edge, one column into the gap), so Ink never wraps or cuts them.
  const fitted = (i: number, text: string) => cutToWidth(text, widths[i] as number);
  const cell = (i: number, content: ReactNode) => (
    <Box key={i} width={widths[i]} marginRight={i < columns.length - 1 ? GAP : 0} flexShrink={0}>
      {content}
    </Box>
  );
  return (
    <Box flexDirection="column">
      <Box>
        {columns.map((column, i) =>
          cell(
            i,
            // A column is never narrower than its header (fitColumns' minimum).
            <Toned tone="strong">{column.header}</Toned>,
          ),
        )}
      </Box>
      {rows.map((row, r) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: rows are static output, never reordered
        <Box key={r}>
          {columns.map((column, i) => {
            const tone = column.tone?.(row);
            const text = fitted(i, cells[r]?.[i] ?? "");
            return cell(i, tone ? <Toned tone={tone}>{text}</Toned> : <Text>{text}</Text>);
          })}
        </Box>
      ))}
    </Box>
  );
}

/** Each row as its own block of labelled lines, a blank line between rows. */
function Records<Row>({
  columns,
  rows,
  width,
}: Pick<TableProps<Row>, "columns" | "rows"> & { width: number }) {
  return (
    <Box flexDirection="column" gap={1}>
      {rows.map((row, r) => (
        <KeyValue
          // biome-ignore lint/suspicious/noArrayIndexKey: rows are static output, never reordered
          key={r}
          width={width}
          fields={columns.map((column) => ({
            label: column.header,
            value: column.value(row),
            tone: column.tone?.(row),
            copy: column.copy === true,
          }))}
        />
      ))}
    </Box>
  );
}
