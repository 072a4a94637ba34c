import { Box, Text } from "ink";
import { RESTORE } from "#cli/commands/backup.js";
import type { BackupReport } from "#cli/commands/backup-store.js";
import { type Field, KeyValue } from "#cli/components/key-value.js";

/** A finished backup: where, each file and its size, how to restore, and a missing identity key. */
export function BackupView({ report }: { report: BackupReport }) {
  const fields: Field[] = [
    { label: "Backup", value: report.to, tone: "success" },
    ...report.files.map((file) => ({
      label: file.file,
      value: `${file.bytes.toLocaleString("en")} bytes`,
    })),
  ];
  if (!report.identityKeyIncluded) {
    fields.push({
      label: "identity-key",
      value:
        "not in the data directory (the daemon reads CONSENT_IDENTITY_KEY): keep that value with this backup, or no subject state can be found after a restore",
      tone: "failure",
    });
  }
  return (
    <Box flexDirection="column">
      <KeyValue fields={fields} />
      <Box marginTop={1}>
        <Text>{RESTORE}.</Text>
      </Box>
    </Box>
  );
}

export const backupView = () => (report: BackupReport) => <BackupView report={report} />;
