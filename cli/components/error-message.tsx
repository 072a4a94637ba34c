import { Box, renderToString, Text } from "ink";
import { printable } from "#cli/format.js";
import { type Problem, stackOf } from "#cli/problems.js";
import { ColorProvider, Toned } from "#cli/theme.js";

export interface ErrorMessageProps {
  problem: Problem;
  /** With --debug: the original error's stack and causes. */
  debug?: boolean;
}

/** A failure as the operator sees it on stderr: one sentence, the violated rules, a hint. */
export function ErrorMessage({ problem, debug }: ErrorMessageProps) {
  return (
    <Box flexDirection="column">
      {/* The daemon's words may repeat stored text; the CLI's own hint and stack are trusted. */}
      <Toned tone="failure">✖ {printable(problem.message)}</Toned>
      {problem.details.map((detail) => (
        <Text key={`${detail.field}:${detail.message}`}> • {printable(detail.message)}</Text>
      ))}
      {problem.hint ? <Toned tone="muted">hint: {problem.hint}</Toned> : null}
      {debug ? <Toned tone="muted">{stackOf(problem.cause)}</Toned> : null}
    </Box>
  );
}

/** The problem as text for stderr, outside any running Ink app (errors may precede it). */
export function renderProblem(
  problem: Problem,
  options: { color: boolean; columns: number; debug: boolean },
): string {
  return renderToString(
    <ColorProvider color={options.color}>
      <ErrorMessage problem={problem} debug={options.debug} />
    </ColorProvider>,
    { columns: options.columns },
  );
}
