import { Box, Text } from "ink";
import { printable } from "#cli/format.js";
import { useColumns } from "#cli/terminal.js";
import { textWidth, widestPiece, wrapToWidth } from "#cli/text-width.js";
import { type Tone, Toned } from "#cli/theme.js";

/** The result of one diagnostic check. */
export interface CheckResult {
  name: string;
  /** `warn`: nothing consentctl needs is wrong, but something else is (doctor exits 0). */
  status: "pass" | "fail" | "warn" | "skip";
  /** What was found ("daemon answered in 4 ms"). */
  detail: string;
  /** What to do about a failure, a warning or a skip. */
  hint?: string;
}

const MARK: Record<CheckResult["status"], [string, Tone]> = {
  pass: ["✔", "success"],
  fail: ["✖", "failure"],
  warn: ["!", "warning"],
  skip: ["–", "muted"],
};

/** How far a check's text below its name is indented, when it does not fit beside the names. */
const INDENT = 2;

/** The lines of text a check shows: its detail, and the hint of a failure, a warning or a skip. */
function linesOf(check: CheckResult): string[] {
  const detail = printable(check.detail);
  return check.hint && check.status !== "pass"
    ? [detail, `hint: ${printable(check.hint)}`]
    : [detail];
}

/**
 * One line per check with its verdict, details aligned two spaces after the longest name (as
 * KeyValue aligns values), and the hint under them for failures and skips. A detail or hint
 * longer than the line wraps within that column, so every line of it starts under the first:
 * left to Ink, it would wrap back to the terminal's first column, across the names (wrapToWidth, as
 * KeyValue, breaks only between words, after a list's commas, never inside a time). Where a word
 * (a path, a URL) would not fit beside the names, as on a terminal of 40 columns, each check's
 * text goes below its name instead, indented, as KeyValue does. Details and hints may quote
 * what a daemon (or whatever answers at its address) said: control characters are shown
 * escaped, never sent to the terminal.
 */
export function CheckList({ checks, width }: { checks: readonly CheckResult[]; width?: number }) {
  const columns = useColumns(width);
  const nameWidth = Math.max(0, ...checks.map((check) => textWidth(check.name)));
  const column = nameWidth + 4;
  const texts = checks.map(linesOf);
  const beside = texts.every((lines) =>
    lines.every((line) => widestPiece(line) <= columns - column),
  );
  // Wrapped here, as KeyValue wraps its values, so a time or a list item is never cut.
  const room = beside ? columns - column : columns - INDENT;
  return (
    <Box flexDirection="column" width={width}>
      {checks.map((check, i) => {
        const [mark, tone] = MARK[check.status];
        const [detail, hint] = texts[i] ?? [];
        const text = (
          <Box flexDirection="column" flexGrow={1} paddingLeft={beside ? 0 : INDENT}>
            <Text>{wrapToWidth(detail ?? "", room)}</Text>
            {hint ? <Toned tone="muted">{wrapToWidth(hint, room)}</Toned> : null}
          </Box>
        );
        return (
          <Box key={check.name} flexDirection={beside ? "row" : "column"}>
            <Box width={beside ? column : undefined} flexShrink={0}>
              <Text>
                <Toned tone={tone}>{mark}</Toned> {check.name}
              </Text>
            </Box>
            {text}
          </Box>
        );
      })}
    </Box>
  );
}
