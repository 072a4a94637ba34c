import type { Command } from "commander";
import { examples } from "#cli/format.js";
import { nonEmpty } from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";

/** How a backup is put back, for the help and the report. */
export const RESTORE =
  "Restore: stop the service, then start it with CONSENT_DATA_DIR set to the backup (or copy its files into an empty data directory)";

/**
 * `backup --to DIR`: a consistent copy of the embedded store and its secrets, made while the
 * service runs (backup-store.ts). It reads the data directory (CONSENT_DATA_DIR) on this
 * machine, not the daemon: the copy holds the operator token and the identity key, which never
 * travel over the network.
 */
export function registerBackupCommand(program: Command, runtime: Runtime): void {
  program
    .command("backup")
    .description(
      "copy the embedded store and its secrets into a new directory while the service runs (reads CONSENT_DATA_DIR on this machine)",
    )
    .requiredOption(
      "--to <dir>",
      "the new directory to create, inside one that exists",
      nonEmpty("the backup directory"),
    )
    .addHelpText(
      "after",
      // Wrapped as commander wraps the rest of the help; the report lets Ink wrap it.
      ({ command }) =>
        `${examples(
          "consentctl backup --to /var/backups/consent-2026-11-26",
          "CONSENT_DATA_DIR=/var/lib/consent consentctl backup --to ./consent-backup --json",
        )}\n${command.createHelp().boxWrap(`${RESTORE}.`, 80)}\n`,
    )
    .action((options: { to: string }, command: Command) =>
      runtime.run(command, {
        progress: "Copying the store…",
        auth: "none",
        call: async ({ context }) =>
          (await import("#cli/commands/backup-store.js")).backupDataDir(
            context.dataDir,
            options.to,
            context.env,
          ),
        json: (report) => report,
        view: async () => (await import("#cli/views/backup-views.js")).backupView(),
      }),
    );
}
