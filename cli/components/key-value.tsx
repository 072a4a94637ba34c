import { Box, Text } from "ink";
import { printable } from "#cli/format.js";
import { type Tone, Toned } from "#cli/theme.js";

/** One labelled value; a tone colours the value (e.g. "revoked" in red). */
export interface Field {
  label: string;
  value: string;
  tone?: Tone;
}

/** A record as aligned "label  value" lines: how every `show`-like command prints one object. */
export function KeyValue({ fields }: { fields: readonly Field[] }) {
  const labelWidth = Math.max(0, ...fields.map((field) => field.label.length));
  return (
    <Box flexDirection="column">
      {fields.map((field) => (
        <Box key={field.label}>
          <Box width={labelWidth + 2} flexShrink={0}>
            <Toned tone="muted">{field.label}</Toned>
          </Box>
          <Box flexGrow={1}>
            {field.tone ? (
              <Toned tone={field.tone}>{printable(field.value)}</Toned>
            ) : (
              <Text>{printable(field.value)}</Text>
            )}
          </Box>
        </Box>
      ))}
    </Box>
  );
}
