import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Box, Text } from "ink";
import { type Field, KeyValue } from "#cli/components/key-value.js";
import { SecretNotice } from "#cli/components/secret-notice.js";
import { Table } from "#cli/components/table.js";
import { formatTime } from "#cli/format.js";
import { useColumns } from "#cli/terminal.js";
import { wrapToWidth } from "#cli/text-width.js";
import type { Tone } from "#cli/theme.js";
import { keyExpired } from "#daemon/keys/key-store.js";
import type { ApiKey } from "#gen/consent/v1/admin_pb.js";

/**
 * A key's state at `now`: revoked once a revocation is stored, and expired as the daemon judges
 * it (keyExpired: a key rotated with no grace period has stopped whatever this machine's clock
 * reads, docs/behaviour.md "Key rotation"), so a clock behind the daemon's shows no such key active.
 */
export function keyStatus(key: ApiKey, now = new Date()): { label: string; tone: Tone } {
  if (key.revokedAt) return { label: "revoked", tone: "failure" };
  const dates = {
    expiresAt: key.expiresAt ? timestampDate(key.expiresAt) : null,
    ...(key.replacedAt && { replacedAt: timestampDate(key.replacedAt) }),
  };
  if (keyExpired(dates, now)) return { label: "expired", tone: "failure" };
  return { label: "active", tone: "success" };
}

function keyFields(key: ApiKey): Field[] {
  const status = keyStatus(key);
  return [
    { label: "ID", value: key.id, copy: true },
    { label: "Team", value: key.teamId, copy: true },
    { label: "Environment", value: key.environment },
    { label: "Name", value: key.name || "-" },
    { label: "Scopes", value: key.scopes.join(", ") },
    { label: "Hint", value: key.hint },
    { label: "Status", value: status.label, tone: status.tone },
    { label: "Created", value: formatTime(key.createdAt) },
    { label: "Expires", value: key.expiresAt ? formatTime(key.expiresAt) : "never" },
    ...(key.revokedAt ? [{ label: "Revoked", value: formatTime(key.revokedAt) }] : []),
    ...(key.replacedBy
      ? [
          { label: "Replaced by", value: key.replacedBy, copy: true },
          { label: "Replaced", value: formatTime(key.replacedAt) },
        ]
      : []),
  ];
}

/** A key without its secret. */
export function KeyView({ apiKey }: { apiKey: ApiKey }) {
  return <KeyValue fields={keyFields(apiKey)} />;
}

/** A minted key (create or rotate): what `keys create|rotate` answer with. */
export interface MintedKey {
  apiKey: ApiKey;
  secret: string;
  /** The rotated key, after its expiry was moved to the end of the grace period. */
  previous?: ApiKey;
}

/** A freshly minted key: the secret once, with its warning, then the key's fields. */
export function MintedKeyView({ minted }: { minted: MintedKey }) {
  const { apiKey, secret, previous } = minted;
  return (
    <Box flexDirection="column">
      <SecretNotice
        label="API key"
        secret={secret}
        note="Send it as `Authorization: Bearer <key>`."
      />
      <KeyView apiKey={apiKey} />
      {previous ? <PreviousKeyNote previous={previous} /> : null}
    </Box>
  );
}

/**
 * What became of the rotated key, wrapped here as records are (wrapToWidth): left to Ink, the
 * line could break inside the time at its space.
 */
function PreviousKeyNote({ previous }: { previous: ApiKey }) {
  const columns = useColumns();
  const until =
    keyStatus(previous).label === "active"
      ? `keeps working until ${formatTime(previous.expiresAt)}`
      : "no longer works";
  const note = `The previous key ${previous.hint} (${previous.id}) ${until}.`;
  return (
    <Box marginTop={1}>
      <Text>{wrapToWidth(note, columns)}</Text>
    </Box>
  );
}

/** A team's keys, newest first. */
export function KeysTable({ keys }: { keys: readonly ApiKey[] }) {
  return (
    <Table
      rows={keys}
      empty="This team has no API keys yet."
      columns={[
        { header: "ID", value: (k) => k.id, copy: true },
        { header: "ENV", value: (k) => k.environment },
        { header: "NAME", value: (k) => k.name || "-", shrinks: true },
        { header: "HINT", value: (k) => k.hint },
        { header: "STATUS", value: (k) => keyStatus(k).label, tone: (k) => keyStatus(k).tone },
        { header: "SCOPES", value: (k) => k.scopes.join(","), shrinks: true },
        { header: "EXPIRES", value: (k) => (k.expiresAt ? formatTime(k.expiresAt) : "never") },
      ]}
    />
  );
}

export const keyView = () => (apiKey: ApiKey) => <KeyView apiKey={apiKey} />;
export const mintedKeyView = () => (minted: MintedKey) => <MintedKeyView minted={minted} />;
export const keysView = () => (keys: readonly ApiKey[]) => <KeysTable keys={keys} />;
