import { Box, Text } from "ink";
import { printable } from "#cli/format.js";
import { type Tone, Toned } from "#cli/theme.js";

/** The result of one diagnostic check. */
export interface CheckResult {
  name: string;
  status: "pass" | "fail" | "skip";
  /** What was found ("daemon answered in 4 ms"). */
  detail: string;
  /** What to do about a failure or a skip. */
  hint?: string;
}

const MARK: Record<CheckResult["status"], [string, Tone]> = {
  pass: ["✔", "success"],
  fail: ["✖", "failure"],
  skip: ["–", "muted"],
};

/**
 * One line per check with its verdict, details aligned two spaces after the longest name (as
 * KeyValue aligns values), and the hint indented under them for failures and skips. Details and
 * hints may quote what a daemon (or whatever answers at its address) said: control characters
 * are shown escaped, never sent to the terminal.
 */
export function CheckList({ checks }: { checks: readonly CheckResult[] }) {
  const nameWidth = Math.max(0, ...checks.map((check) => check.name.length));
  return (
    <Box flexDirection="column">
      {checks.map((check) => {
        const [mark, tone] = MARK[check.status];
        return (
          <Box key={check.name} flexDirection="column">
            <Text>
              <Toned tone={tone}>{mark}</Toned> {check.name.padEnd(nameWidth + 2)}
              {printable(check.detail)}
            </Text>
            {check.hint && check.status !== "pass" ? (
              <Toned tone="muted">
                {" ".repeat(nameWidth + 4)}hint: {printable(check.hint)}
              </Toned>
            ) : null}
          </Box>
        );
      })}
    </Box>
  );
}
