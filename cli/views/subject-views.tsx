import { Box, Text } from "ink";
import { KeyValue } from "#cli/components/key-value.js";
import { counted, formatClientTime, formatTime, jsonText } from "#cli/format.js";
import { Toned } from "#cli/theme.js";
import type {
  DeleteSubjectStateResponse,
  ResolveSubjectResponse,
} from "#gen/consent/v1/subject_pb.js";

/** A subject's stored consent state, or the statement that none is stored. */
export function SubjectView({ result }: { result: ResolveSubjectResponse }) {
  const snapshot = result.snapshot;
  if (!result.found || !snapshot) {
    return <Toned tone="muted">No consent state is stored for this subject.</Toned>;
  }
  return (
    <Box flexDirection="column">
      <KeyValue
        fields={[
          { label: "Version", value: String(snapshot.version) },
          { label: "Protocol", value: String(snapshot.protocolVersion) },
          { label: "Client time", value: formatClientTime(snapshot.clientUpdatedAt) },
          { label: "Updated", value: formatTime(snapshot.updatedAt) },
          { label: "Expires", value: formatTime(snapshot.expiresAt) },
        ]}
      />
      <Box flexDirection="column" marginTop={1}>
        <Text>Consent state:</Text>
        <Text>{jsonText(snapshot.consentState ?? {}, 2)}</Text>
      </Box>
    </Box>
  );
}

/** How many stored records an erasure removed (0 is a success: nothing was stored). */
export function SubjectDeletedView({ deleted }: { deleted: number }) {
  return (
    <Text>
      {deleted === 0
        ? "Nothing to delete: no consent state was stored for this subject."
        : `Deleted ${counted(deleted, "stored consent state record")}.`}
    </Text>
  );
}

export const subjectView = () => (result: ResolveSubjectResponse) => (
  <SubjectView result={result} />
);
export const subjectDeletedView = () => (result: DeleteSubjectStateResponse) => (
  <SubjectDeletedView deleted={result.deleted} />
);
