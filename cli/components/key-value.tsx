import { Box, Text, useStdout } from "ink";
import { printable } from "#cli/format.js";
import { type Tone, Toned } from "#cli/theme.js";

/** One labelled value; a tone colours the value (e.g. "revoked" in red). */
export interface Field {
  label: string;
  value: string;
  tone?: Tone;
}

export interface KeyValueProps {
  fields: readonly Field[];
  /** Width to fit; defaults to the terminal's. */
  width?: number;
}

/** The length of the longest run without a space, which a line cannot break but by cutting it. */
function longestWord(text: string): number {
  return Math.max(0, ...text.split(/\s+/).map((word) => [...word].length));
}

/**
 * A record as aligned "label  value" lines: how every `show`-like command prints one object.
 * Where a word of a value (an id, a URL) would not fit beside the aligned labels, as on a
 * terminal of 40 columns, each line is "label: value" instead, and a value whose word does not
 * fit even so goes on a line of its own below its label: an id the operator copies is never cut
 * in two where the terminal is as wide as the id.
 */
export function KeyValue({ fields, width }: KeyValueProps) {
  const { stdout } = useStdout();
  const columns = width ?? (stdout.columns || 80);
  const values = fields.map((field) => printable(field.value));
  const labelWidth = Math.max(0, ...fields.map((field) => field.label.length));
  const fits = (value: string, label: number) => longestWord(value) <= columns - label - 2;
  const aligned = values.every((value) => fits(value, labelWidth));
  return (
    <Box flexDirection="column" width={width}>
      {fields.map((field, i) => {
        const value = values[i] ?? "";
        const text = field.tone ? <Toned tone={field.tone}>{value}</Toned> : <Text>{value}</Text>;
        if (!aligned && !fits(value, field.label.length)) {
          return (
            <Box key={field.label} flexDirection="column">
              <Toned tone="muted">{`${field.label}:`}</Toned>
              <Box paddingLeft={2}>{text}</Box>
            </Box>
          );
        }
        return (
          <Box key={field.label}>
            <Box width={(aligned ? labelWidth : field.label.length) + 2} flexShrink={0}>
              <Toned tone="muted">{aligned ? field.label : `${field.label}:`}</Toned>
            </Box>
            <Box flexGrow={1}>{text}</Box>
          </Box>
        );
      })}
    </Box>
  );
}
