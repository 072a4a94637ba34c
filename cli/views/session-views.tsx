import { Box } from "ink";
import { type Field, KeyValue } from "#cli/components/key-value.js";
import { SecretNotice } from "#cli/components/secret-notice.js";
import { Table } from "#cli/components/table.js";
import { formatTime } from "#cli/format.js";
import type { Session } from "#gen/consent/v1/admin_pb.js";

function sessionFields(session: Session): Field[] {
  return [
    { label: "ID", value: session.id, copy: true },
    { label: "Team", value: session.teamId, copy: true },
    { label: "Created", value: formatTime(session.createdAt) },
    { label: "Expires", value: formatTime(session.expiresAt) },
    ...(session.revokedAt
      ? [{ label: "Revoked", value: formatTime(session.revokedAt), tone: "failure" as const }]
      : []),
  ];
}

/** A dashboard session (never its token). */
export function SessionView({ session }: { session: Session }) {
  return <KeyValue fields={sessionFields(session)} />;
}

/** A new session: the token once, with its warning, then the session's fields. */
export function NewSessionView({ session, token }: { session: Session; token: string }) {
  return (
    <Box flexDirection="column">
      <SecretNotice
        label="Session token"
        secret={token}
        note="The browser sends it as the consent_session cookie."
      />
      <SessionView session={session} />
    </Box>
  );
}

/** A team's unexpired sessions, newest first: a revoked one stays listed until it expires. */
export function SessionsTable({ sessions }: { sessions: readonly Session[] }) {
  return (
    <Table
      rows={sessions}
      empty="This team has no unexpired sessions."
      columns={[
        { header: "ID", value: (s) => s.id, copy: true },
        {
          header: "STATUS",
          value: (s) => (s.revokedAt ? "revoked" : "active"),
          tone: (s) => (s.revokedAt ? "failure" : "success"),
        },
        { header: "CREATED", value: (s) => formatTime(s.createdAt) },
        { header: "EXPIRES", value: (s) => formatTime(s.expiresAt) },
      ]}
    />
  );
}

export const sessionsView = () => (sessions: readonly Session[]) => (
  <SessionsTable sessions={sessions} />
);
export const sessionView = () => (session: Session) => <SessionView session={session} />;
export const newSessionView =
  () =>
  ({ session, token }: { session: Session; token: string }) => (
    <NewSessionView session={session} token={token} />
  );
