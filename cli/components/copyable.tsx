import { Box } from "ink";
import { textWidth } from "#cli/text-width.js";
import { type Tone, Toned } from "#cli/theme.js";

/**
 * A value the operator copies out of the terminal (a secret, an id, a URL, a loader snippet),
 * printed whole as one line, however narrow the terminal. Ink breaks text wider than its box
 * with real line breaks, and indents each part like the first, so a copy of it would carry the
 * breaks along; this box is as wide as the value, past the terminal's edge if need be, and the
 * terminal wraps the line softly instead, which a copy does not see. Give it a line of its own,
 * or the start of one, so a line-wide selection takes the value alone.
 */
export function Copyable({ value, tone }: { value: string; tone?: Tone }) {
  return (
    <Box width={textWidth(value)} flexShrink={0}>
      <Toned tone={tone}>{value}</Toned>
    </Box>
  );
}

/**
 * Words, then a value to copy ("more rows: add --page-token TOKEN"): on one line where both fit,
 * else the value at the start of the next line, whole as in Copyable.
 */
export function CopyableAfter({ text, value, tone }: { text: string; value: string; tone?: Tone }) {
  return (
    <Box flexWrap="wrap">
      <Toned tone={tone}>{`${text} `}</Toned>
      <Copyable value={value} tone={tone} />
    </Box>
  );
}
