import { Box } from "ink";
import { Copyable } from "#cli/components/copyable.js";
import { printable } from "#cli/format.js";
import { useColumns } from "#cli/terminal.js";
import { textWidth, widestPiece, wrapToWidth } from "#cli/text-width.js";
import { type Tone, Toned } from "#cli/theme.js";

/** One labelled value; a tone colours the value (e.g. "revoked" in red). */
export interface Field {
  label: string;
  value: string;
  tone?: Tone;
  /**
   * A value the operator copies (an id, a URL, a path): never broken in two, however narrow the
   * terminal (see Copyable).
   */
  copy?: boolean;
}

export interface KeyValueProps {
  fields: readonly Field[];
  /** Width to fit; defaults to the terminal's. */
  width?: number;
}

/**
 * What a value needs beside its label: a value to copy, all of it; words, its widest piece (a
 * word, a time, an item of a list: widestPiece).
 */
function needed(field: Field, value: string): number {
  return field.copy ? textWidth(value) : widestPiece(value);
}

/** How far a value below its label is indented, when it fits so. */
const INDENT = 2;

/**
 * A record as aligned "label  value" lines: how every `show`-like command prints one object.
 * Where a word of a value (an id, a URL) would not fit beside the aligned labels, as on a
 * terminal of 40 columns, each line is "label: value" instead, and a value whose word does not
 * fit even so goes on a line of its own below its label, indented: an id the operator copies is
 * never cut in two where the terminal is as wide as the id. A value to copy (`copy`) wider than
 * that line starts the line instead, unindented and whole, for the terminal to wrap softly: a
 * copy of it is the value, with no line break or indent inside.
 */
export function KeyValue({ fields, width }: KeyValueProps) {
  const columns = useColumns(width);
  const values = fields.map((field) => printable(field.value));
  const labelWidth = Math.max(0, ...fields.map((field) => textWidth(field.label)));
  const needs = fields.map((field, i) => needed(field, values[i] ?? ""));
  const fits = (i: number, label: number) => (needs[i] as number) <= columns - label - 2;
  const aligned = fields.every((_, i) => fits(i, labelWidth));
  return (
    <Box flexDirection="column" width={width}>
      {fields.map((field, i) => {
        const value = values[i] ?? "";
        // Words are wrapped here, not by Ink, which would break a time at its space or a list
        // inside an item (cli/README.md, "Output contract": times are never cut).
        const text = (room: number) =>
          field.copy ? (
            <Copyable value={value} tone={field.tone} />
          ) : (
            <Toned tone={field.tone}>{wrapToWidth(value, room)}</Toned>
          );
        const label = textWidth(field.label);
        if (!aligned && !fits(i, label)) {
          const indent = (needs[i] as number) <= columns - INDENT ? INDENT : 0;
          return (
            <Box key={field.label} flexDirection="column">
              <Toned tone="muted">{`${field.label}:`}</Toned>
              <Box paddingLeft={indent}>{text(columns - indent)}</Box>
            </Box>
          );
        }
        const labelColumn = (aligned ? labelWidth : label) + 2;
        return (
          <Box key={field.label}>
            <Box width={labelColumn} flexShrink={0}>
              <Toned tone="muted">{aligned ? field.label : `${field.label}:`}</Toned>
            </Box>
            <Box flexGrow={1}>{text(columns - labelColumn)}</Box>
          </Box>
        );
      })}
    </Box>
  );
}
