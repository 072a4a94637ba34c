import { Box, Text, useStdout } from "ink";
import type { ReactNode } from "react";
import { KeyValue } from "#cli/components/key-value.js";
import { printable } from "#cli/format.js";
import { cutToWidth, textWidth } from "#cli/text-width.js";
import { type Tone, Toned } from "#cli/theme.js";

/** One column: its header, how a row shows in it, and optionally a tone per row. */
export interface Column<Row> {
  header: string;
  value: (row: Row) => string;
  tone?: (row: Row) => Tone | undefined;
  /** Never shortened: an id the operator copies into the next command (keys revoke ID). */
  whole?: boolean;
  /**
   * A value to copy that a table may still cut (a URL): whole in the blocks, as `whole` values
   * are (KeyValue's `copy`).
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
/** A column never shrinks below this, so "…" always has something in front of it. */
const MIN_WIDTH = 4;

/**
 * Column widths that fit `available` characters: when the natural widths are too wide, the widest
 * columns give way first (names shrink before "plan" or "env"). Columns marked `whole` keep their
 * width. Undefined when no widths fit: the whole columns, the others at their minimum and the gaps
 * between them are already wider than `available`.
 */
export function fitColumns(
  natural: readonly number[],
  available: number,
  gap = GAP,
  whole: readonly boolean[] = [],
): number[] | undefined {
  const kept = natural.reduce((sum, width, i) => sum + (whole[i] ? width : 0), 0);
  const budget = available - gap * Math.max(0, natural.length - 1) - kept;
  const used = (cap: number) =>
    natural.reduce((sum, width, i) => sum + (whole[i] ? 0 : Math.min(width, cap)), 0);
  if (used(Number.POSITIVE_INFINITY) <= budget) return [...natural];
  if (used(MIN_WIDTH) > budget) return undefined;
  let cap = Math.max(...natural);
  while (used(cap) > budget) cap--;
  const widths = natural.map((width, i) => (whole[i] ? width : Math.min(width, cap)));
  // Hand the characters the last step freed back to the columns that were cut.
  let spare = budget - used(cap);
  for (let i = 0; i < widths.length && spare > 0; i++) {
    if ((natural[i] as number) > (widths[i] as number)) {
      widths[i] = (widths[i] as number) + 1;
      spare--;
    }
  }
  return widths;
}

/**
 * Rows as a table fitted to the terminal width; long cells end in "…". Widths are terminal
 * columns (a CJK character or an emoji takes two), and a cell is cut to its column between
 * graphemes, so the columns line up and keep their two spaces whatever the text. On a terminal too narrow
 * for any table (the whole ids alone fill 40 columns), one block of "HEADER: value" lines per
 * row instead: a table squeezed past its width loses the gaps between its columns and wraps.
 */
export function Table<Row>({ columns, rows, empty, width }: TableProps<Row>) {
  const { stdout } = useStdout();
  if (rows.length === 0) return <Toned tone="muted">{empty}</Toned>;
  const available = width ?? (stdout.columns || 80);
  const cells = rows.map((row) => columns.map((column) => printable(column.value(row))));
  const natural = columns.map((column, i) =>
    Math.max(textWidth(column.header), ...cells.map((line) => textWidth(line[i] ?? ""))),
  );
  const widths = fitColumns(
    natural,
    available,
    GAP,
    columns.map((column) => column.whole === true),
  );
  if (!widths) return <Records columns={columns} rows={rows} width={available} />;
  // Cut here rather than by Ink's truncate-end, which can leave a wide character straddling the
  // column's edge, one column into the gap.
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
            <Toned tone="strong" wrap="truncate-end">
              {fitted(i, column.header)}
            </Toned>,
          ),
        )}
      </Box>
      {rows.map((row, r) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: rows are static output, never reordered
        <Box key={r}>
          {columns.map((column, i) => {
            const tone = column.tone?.(row);
            const text = fitted(i, cells[r]?.[i] ?? "");
            return cell(
              i,
              tone ? (
                <Toned tone={tone} wrap="truncate-end">
                  {text}
                </Toned>
              ) : (
                <Text wrap="truncate-end">{text}</Text>
              ),
            );
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
            copy: column.whole === true || column.copy === true,
          }))}
        />
      ))}
    </Box>
  );
}
