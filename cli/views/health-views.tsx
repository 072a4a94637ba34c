import { Box, Text } from "ink";
import {
  type HealthReport,
  SUBJECTS_UNAVAILABLE,
  storeVerdict,
} from "#cli/commands/health-check.js";
import { CheckList, type CheckResult } from "#cli/components/check-list.js";
import { KeyValue } from "#cli/components/key-value.js";
import { WRITES_REFUSED, WRITES_REFUSED_HINT } from "#cli/problems.js";

/** `health`: the daemon answered; whether its store does. */
export function HealthView({ report }: { report: HealthReport }) {
  return (
    <KeyValue
      fields={[
        {
          label: "Daemon",
          value: `up at ${report.daemonUrl} (${report.latencyMs} ms)`,
          tone: "success",
        },
        storeField(report),
        ...(report.subjectsOk === false
          ? [{ label: "Subjects", value: SUBJECTS_UNAVAILABLE, tone: "failure" as const }]
          : []),
      ]}
    />
  );
}

function storeField(report: HealthReport) {
  switch (storeVerdict(report)) {
    case "down":
      return {
        label: "Store",
        value: `unavailable (daemon reports ${report.status})`,
        tone: "failure" as const,
      };
    case "refusing":
      return {
        label: "Store",
        value: `${WRITES_REFUSED}; ${WRITES_REFUSED_HINT}`,
        tone: "failure" as const,
      };
    case "ok":
      return { label: "Store", value: "ok", tone: "success" as const };
  }
}

/** `doctor`: one line per check, then a verdict. */
export function DoctorView({ checks }: { checks: readonly CheckResult[] }) {
  const failures = checks.filter((check) => check.status === "fail").length;
  const warnings = checks.filter((check) => check.status === "warn").length;
  const warned = `${warnings} warning${warnings === 1 ? "" : "s"}`;
  return (
    <Box flexDirection="column">
      <CheckList checks={checks} />
      <Box marginTop={1}>
        <Text>
          {failures > 0
            ? `${failures} check${failures === 1 ? "" : "s"} failed.`
            : warnings > 0
              ? `No check failed; ${warned}.`
              : "All checks passed."}
        </Text>
      </Box>
    </Box>
  );
}

export const healthView = () => (report: HealthReport) => <HealthView report={report} />;
export const doctorView = () => (checks: readonly CheckResult[]) => <DoctorView checks={checks} />;
/** `health` when the daemon did not answer: the checks as `doctor` lists them. */
export const checkListView = () => (checks: readonly CheckResult[]) => (
  <CheckList checks={checks} />
);
