import { Box, Text } from "ink";
import { Fragment, type ReactNode } from "react";
import { KeyValue } from "#cli/components/key-value.js";
import { printable } from "#cli/format.js";
import { useColumns } from "#cli/terminal.js";
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
  /**
   * The widest value the column can hold (an id's 36 columns, a time's 20), for a layout made
   * before the rows are seen (streamWidths). A column without it is free text, which takes the
   * rest of such a line.
   */
  widest?: number;
}

export interface TableProps<Row> {
  columns: readonly Column<Row>[];
  rows: readonly Row[];
  /** Printed instead of an empty table ("No teams yet."). */
  empty: string;
  /** Width to fit; defaults to the terminal's. */
  width?: number;
}

/** The spaces parting two columns. */
export const GAP = 2;
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
 * Widths of `columns` by the table's rule, for `natural` widths in `available` columns: a column
 * that `shrinks` to no fewer than SHRUNK_WIDTH (and its header), every other whole. Undefined
 * where no widths fit: the rows are then printed as blocks (RowBlock).
 */
export function tableWidths<Row>(
  columns: readonly Column<Row>[],
  natural: readonly number[],
  available: number,
): number[] | undefined {
  const minimum = columns.map((column, i) =>
    column.shrinks ? Math.max(textWidth(column.header), SHRUNK_WIDTH) : (natural[i] as number),
  );
  return fitColumns(natural, minimum, available);
}

/**
 * Widths for rows not yet seen (a live stream), by the table's rule: each column at its
 * `widest`, free text the rest of the line. Undefined where even so no widths fit: blocks.
 */
export function streamWidths<Row>(
  columns: readonly Column<Row>[],
  available: number,
): number[] | undefined {
  const known = columns.map((column) => Math.max(textWidth(column.header), column.widest ?? 0));
  const fixed = columns.reduce(
    (total, column, i) => total + (column.widest === undefined ? 0 : (known[i] as number)),
    0,
  );
  // Free text gets the rest of the line, at least SHRUNK_WIDTH: where less is left, no table fits.
  const rest = Math.max(SHRUNK_WIDTH, available - fixed - GAP * (columns.length - 1));
  const natural = columns.map((column, i) =>
    column.widest === undefined ? Math.max(rest, known[i] as number) : (known[i] as number),
  );
  return tableWidths(columns, natural, available);
}

/**
 * Rows as a table fitted to the terminal width; long free text ends in "…". Widths are terminal
 * columns (a CJK character or an emoji takes two), and a cell is cut to its column between
 * graphemes, so the columns line up and keep their two spaces whatever the text. A table is
 * printed only where every header is whole, every column but those that `shrinks` is whole and
 * those keep SHRUNK_WIDTH columns; on a narrower terminal (an id alone fills 36), one block of
 * "HEADER: value" lines per row instead: a table squeezed further says "pendi…" and "2026-…".
 *
 * The table is one text, its lines laid out here (each cell measured once): Ink lays out and
 * draws each element of a frame, and a box per cell made a thousand-row `logs list` cost
 * seconds.
 */
export function Table<Row>({ columns, rows, empty, width }: TableProps<Row>) {
  const available = useColumns(width);
  if (rows.length === 0) return <Toned tone="muted">{empty}</Toned>;
  const cells = rows.map((row) => columns.map((column) => cellText(column, row)));
  const natural = columns.map((column, i) =>
    Math.max(textWidth(column.header), ...cells.map((line) => textWidth(line[i] ?? ""))),
  );
  const widths = tableWidths(columns, natural, available);
  if (!widths) {
    return (
      <Box flexDirection="column" gap={1}>
        {rows.map((row, r) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows are static output, never reordered
          <RowBlock key={r} columns={columns} row={row} width={available} />
        ))}
      </Box>
    );
  }
  // As wide as its lines, so Ink never wraps them where the table is laid out for a width wider
  // than its place (a test's `width`): they go past its edge, as a row of boxes would.
  const lineWidth = widths.reduce((total, columnWidth) => total + columnWidth + GAP, -GAP);
  return (
    <Box width={lineWidth} flexShrink={0}>
      <Text>
        {lineParts(columns, widths)}
        {rows.map((row, r) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: rows are static output, never reordered
          <Fragment key={r}>
            {"\n"}
            {lineParts(columns, widths, { row, cells: cells[r] as string[] })}
          </Fragment>
        ))}
      </Text>
    </Box>
  );
}

/**
 * One line of a table: a row's cells, or the headers without a row, at `widths` (tableWidths),
 * two spaces apart.
 */
export function TableLine<Row>({
  columns,
  widths,
  row,
}: {
  columns: readonly Column<Row>[];
  widths: readonly number[];
  row?: Row;
}) {
  return <Text>{lineParts(columns, widths, row === undefined ? undefined : { row })}</Text>;
}

/**
 * The text of a table's line at `widths`: each cell cut to its width and padded to it, two
 * spaces after each but the last, and the cells with a tone (every header) in it. Plain cells
 * run together into one string. `cells` are the row's cellText, where they are known already.
 */
function lineParts<Row>(
  columns: readonly Column<Row>[],
  widths: readonly number[],
  line?: { row: Row; cells?: readonly string[] },
): ReactNode[] {
  const parts: ReactNode[] = [];
  let plain = "";
  columns.forEach((column, i) => {
    // Cells are cut here, to their column's width, so Ink never wraps or cuts them. A column
    // is never narrower than its header (fitColumns' minimum).
    const width = widths[i] as number;
    const text =
      line === undefined
        ? column.header
        : cutToWidth(line.cells?.[i] ?? cellText(column, line.row), width);
    const tone = line === undefined ? "strong" : column.tone?.(line.row);
    const pad = i < columns.length - 1 ? " ".repeat(width - textWidth(text) + GAP) : "";
    if (tone === undefined) {
      plain += text + pad;
      return;
    }
    if (plain !== "") parts.push(plain);
    parts.push(
      <Toned key={column.header} tone={tone}>
        {text}
      </Toned>,
    );
    plain = pad;
  });
  if (plain !== "") parts.push(plain);
  return parts;
}

/** A row's value in a column, as a terminal may show it (printable). */
export function cellText<Row>(column: Column<Row>, row: Row): string {
  return printable(column.value(row));
}

/** A row as a block of labelled lines, where no table fits: how a table too wide prints. */
export function RowBlock<Row>({
  columns,
  row,
  width,
}: {
  columns: readonly Column<Row>[];
  row: Row;
  width: number;
}) {
  return (
    <KeyValue
      width={width}
      fields={columns.map((column) => ({
        label: column.header,
        value: column.value(row),
        tone: column.tone?.(row),
        copy: column.copy === true,
      }))}
    />
  );
}
