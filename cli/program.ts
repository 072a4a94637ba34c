import { Command, Option } from "commander";
import { registerBackupCommand } from "#cli/commands/backup.js";
import { registerBannerCommands } from "#cli/commands/banners.js";
import { registerDoctorCommand } from "#cli/commands/doctor.js";
import { registerHealthCommand } from "#cli/commands/health.js";
import { registerKeyCommands } from "#cli/commands/keys.js";
import { registerLogCommands } from "#cli/commands/logs.js";
import { registerSessionCommands } from "#cli/commands/sessions.js";
import { registerSubjectCommands } from "#cli/commands/subjects.js";
import { registerTeamCommands } from "#cli/commands/teams.js";
import { registerWebhookCommands } from "#cli/commands/webhooks.js";
import { jsonText } from "#cli/format.js";
import { nonEmpty, parseDaemonUrl } from "#cli/option-parsers.js";
import type { Io } from "#cli/output.js";
import {
  type CommandSpec,
  runCommand,
  runStreamCommand,
  type Session,
  type StreamCommandSpec,
} from "#cli/run-command.js";

/** What command modules get: one way to run a spec, bound to this invocation's streams. */
export interface Runtime {
  run<T>(command: Command, spec: CommandSpec<T>): Promise<void>;
  stream(command: Command, spec: StreamCommandSpec): Promise<void>;
}

/**
 * The command tree. Settings made here before the groups are added (exitOverride, output) are
 * inherited by every subcommand, so commander's own parse errors all reach main(). `json` says
 * whether --json is on the command line: parse errors are then printed as JSON too.
 */
export function createProgram(io: Io, session: Session, json: boolean): Command {
  const program = new Command("consentctl")
    .description(
      "Operator CLI of the consent service: teams, API keys, sessions, banners, subjects, consent logs, webhooks.",
    )
    .addOption(
      new Option(
        "--daemon <url>",
        "daemon URL, h2c (default: CONSENT_DAEMON_URL, then http://127.0.0.1:50051)",
      ).argParser(parseDaemonUrl),
    )
    .addOption(
      new Option(
        "--token <token>",
        "operator token (default: CONSENT_ADMIN_TOKEN, then <CONSENT_DATA_DIR>/admin-token)",
      ).argParser(nonEmptyToken),
    )
    .option("--json", "print one JSON object on stdout and nothing else")
    .option("--debug", "log daemon calls and print stack traces on stderr")
    .showHelpAfterError(json ? false : "(run the command with --help for usage)")
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      outputError: (text, write) => write(json ? usageErrorJson(text) : text),
    });
  const runtime: Runtime = {
    run: (command, spec) => runCommand(command, spec, io, session),
    stream: (command, spec) => runStreamCommand(command, spec, io, session),
  };
  registerTeamCommands(program, runtime);
  registerKeyCommands(program, runtime);
  registerSessionCommands(program, runtime);
  registerBannerCommands(program, runtime);
  registerSubjectCommands(program, runtime);
  registerLogCommands(program, runtime);
  registerWebhookCommands(program, runtime);
  registerHealthCommand(program, runtime);
  registerDoctorCommand(program, runtime);
  registerBackupCommand(program, runtime);
  return program;
}

/** commander's "error: missing required argument 'id'" as the --json error object. */
function usageErrorJson(text: string): string {
  return `${jsonText({ error: text.trim().replace(/^error: /, ""), code: "usage" })}\n`;
}

/** An empty --token (an unset shell variable) is a mistake, not a wish for the file's token. */
const nonEmptyToken = nonEmpty("the token");
