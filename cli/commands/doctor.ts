import type { Command } from "commander";
import { runDoctor } from "#cli/commands/doctor-checks.js";
import type { GlobalOptions } from "#cli/context.js";
import { examples } from "#cli/format.js";
import type { Runtime } from "#cli/program.js";

/**
 * `doctor`: environment, token, daemon, store, token validity and clock, one line each. The
 * report is the command's output (stdout, also with --json); exit 1 when any check failed.
 */
export function registerDoctorCommand(program: Command, runtime: Runtime): void {
  program
    .command("doctor")
    .description(
      "diagnose the setup: environment, data file modes, daemon, store, operator token, clock skew",
    )
    .addHelpText(
      "after",
      examples("consentctl doctor", "CONSENT_DATA_DIR=/var/lib/consent consentctl doctor --json"),
    )
    .action((_options: unknown, command: Command) =>
      runtime.run(command, {
        progress: "Running checks…",
        // The doctor finds and tries the token itself, reporting problems instead of stopping.
        auth: "none",
        diagnoses: true,
        call: ({ client, context }) =>
          runDoctor({ globals: command.optsWithGlobals<GlobalOptions>(), context, client }),
        json: (checks) => ({ ok: checks.every((check) => check.status !== "fail"), checks }),
        view: async () => (await import("#cli/views/health-views.js")).doctorView(),
        exitCode: (checks) => (checks.some((check) => check.status === "fail") ? 1 : 0),
      }),
    );
}
