import { Box } from "ink";
import { Copyable } from "#cli/components/copyable.js";
import { Toned } from "#cli/theme.js";

export interface SecretNoticeProps {
  /** What the secret is ("API key", "Session token"). */
  label: string;
  secret: string;
  /** Extra guidance, e.g. the cookie the token goes in. */
  note?: string;
  /** How the daemon keeps it, said in the warning; API keys and sessions: only a digest. */
  kept?: string;
}

/**
 * A secret the daemon shows exactly once (decisions §2: of keys and sessions only a digest is
 * stored). It is printed whole on a line of its own, never cut or broken however narrow the
 * terminal (Copyable), with a warning that it cannot be shown again.
 */
export function SecretNotice({
  label,
  secret,
  note,
  kept = "only its digest is stored",
}: SecretNoticeProps) {
  return (
    <Box flexDirection="column" marginBottom={1}>
      <Toned tone="warning">
        ⚠ {label}: copy it now. It will not be shown again ({kept}).
      </Toned>
      <Copyable value={secret} />
      {note ? <Toned tone="muted">{note}</Toned> : null}
    </Box>
  );
}
