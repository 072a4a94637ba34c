import { Box, Text } from "ink";
import { RESTORE } from "#cli/commands/backup.js";
import type { BackupReport } from "#cli/commands/backup-store.js";
import { type Field, KeyValue } from "#cli/components/key-value.js";
import { Toned } from "#cli/theme.js";

/** A finished backup: where, each file and its size, what to keep beside it, how to restore. */
export function BackupView({ report }: { report: BackupReport }) {
  const fields: Field[] = [
    { label: "Backup", value: report.to, tone: "success", copy: true },
    ...report.files.map((file) => ({
      label: file.file,
      value: `${file.bytes.toLocaleString("en")} bytes`,
    })),
  ];
  return (
    <Box flexDirection="column">
      <KeyValue fields={fields} />
      {report.warnings.map((warning) => (
        <Toned key={warning} tone="failure">
          {`warning: ${warning}`}
        </Toned>
      ))}
      <Box marginTop={1}>
        <Text>{RESTORE}.</Text>
      </Box>
    </Box>
  );
}

export const backupView = () => (report: BackupReport) => <BackupView report={report} />;
