import { readFileSync } from "node:fs";
import { Command, CommanderError, Option } from "commander";
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
import { examples, jsonText } from "#cli/format.js";
import { metadataValue, parseDaemonUrl, unquotedRefusal } from "#cli/option-parsers.js";
import { type Io, writeJson } from "#cli/output.js";
import { EXIT_USAGE } from "#cli/problems.js";
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
  const program = new Command("consentctl");
  program
    .description(
      "Operator CLI of the consent service: teams, API keys, sessions, banners, subjects, consent logs, webhooks.",
    )
    .addOption(
      new Option(
        "--daemon <url>",
        "daemon URL, h2c (default: CONSENT_DAEMON_URL, then http://127.0.0.1:50051)",
      ).argParser(unquotedRefusal(program, "--daemon <url>", parseDaemonUrl)),
    )
    .addOption(
      new Option(
        "--token <token>",
        "operator token (default: CONSENT_ADMIN_TOKEN, then <CONSENT_DATA_DIR>/admin-token)",
      ).argParser(unquotedRefusal(program, "--token <token>", tokenValue)),
    )
    .option(
      "--json",
      "print JSON on stdout and nothing else (JSON Lines for logs tail, and for logs export without --out)",
    )
    .option("--debug", "log daemon calls and print stack traces on stderr")
    .option("-V, --version", "print the version of consentctl")
    .showHelpAfterError(json ? false : "(run the command with --help for usage)")
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      outputError: (text, write) => write(json ? usageErrorJson(text) : text),
    })
    // Descriptions wrap beside a long term too: commander wraps only with 40 columns left for
    // them, and the `webhooks` group's `replay [options] <webhook-id> [delivery-id]` leaves 32
    // at 80, so that one help came out in lines of 150.
    .configureHelp({ minWidthToWrap: 30 });
  program.on("option:version", () => printVersion(io, json));
  program.addHelpText("beforeAll", ({ error, command }) => {
    showHelpOfHelp(command);
    refuseUnknownCommand(command);
    if (json && error) refuseMissingCommand(io, command);
    return "";
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
  addHelpCommand(program);
  for (const group of program.commands) if (group.commands.length > 0) addGroupHelpCommand(group);
  return program;
}

/** commander's "error: missing required argument 'id'" as the --json error object. */
function usageErrorJson(text: string, hint?: string): string {
  const error = text.trim().replace(/^error: /, "");
  return `${jsonText({ error, code: "usage", ...(hint ? { hint } : {}) })}\n`;
}

/** The package's own package.json, beside cli/ (bin/bundle.js keeps import.meta.url the source's). */
const PACKAGE_JSON = new URL("../package.json", import.meta.url);

/**
 * `--version` (and `-V`, as commander's own): the package's version, read only when asked, so
 * no other command pays for it. With --json it is `{ "version" }`, one JSON document like every
 * other answer.
 */
function printVersion(io: Io, json: boolean): never {
  const { version } = JSON.parse(readFileSync(PACKAGE_JSON, "utf8")) as { version: string };
  if (json) writeJson(io, { version });
  else io.stdout.write(`${version}\n`);
  throw new CommanderError(0, "commander.version", version);
}

/**
 * With --json, the help commander shows for a group (or the program) run without a command is a
 * usage error like any other: one JSON object on stderr, exit 2, never a page of text.
 */
function refuseMissingCommand(io: Io, command: Command): never {
  const path = commandPath(command);
  const names = command.commands.map((sub) => sub.name()).filter((name) => name !== "help");
  io.stderr.write(
    usageErrorJson(
      `${path} needs a command: ${names.join(", ")}`,
      `run \`${path} --help\` for usage`,
    ),
  );
  throw new CommanderError(EXIT_USAGE, "commander.missingCommand", `${path} needs a command`);
}

/**
 * Help is shown only for a command that exists. commander shows a group's own help for
 * `teams nope --help` (the help option is read before the command name is looked up) and for
 * `teams help nope` (its help command falls back to the group's help): both are the unknown
 * command's usage error instead, in commander's words (its "Did you mean…?" included), exit 2.
 */
function refuseUnknownCommand(group: Command): void {
  const [first, second] = group.args;
  const name = first === "help" ? second : first;
  if (group.commands.length === 0 || name === undefined || name.startsWith("-")) return;
  if (findCommand(group, name)) return;
  // commander's unknownCommand() (not in its typings) names the first argument.
  group.args = [name];
  (group as Command & { unknownCommand(): never }).unknownCommand();
}

/**
 * `teams help help`: commander looks the name after a group's `help` up among the group's
 * commands only, where its help command is not, and falls back to the group's help as an error
 * (stderr, exit 2). It is the help command's own help instead, on stdout, exit 0, as
 * `consentctl help help` and `teams help create` are.
 */
function showHelpOfHelp(group: Command): void {
  const [first, second] = group.args;
  if (first !== "help" || second !== "help") return;
  const help = findCommand(group, "help");
  if (!help) return;
  help.outputHelp();
  throw new CommanderError(0, "commander.helpDisplayed", "(outputHelp)");
}

/** A command of `parent` by name or alias, its help command (commander's, in a group) included. */
function findCommand(parent: Command, name: string): Command | undefined {
  return [...parent.commands, ...parent.createHelp().visibleCommands(parent)].find(
    (sub) => sub.name() === name || sub.aliases().includes(name),
  );
}

/** "consentctl teams": the names from the program down to `command`. */
function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at; at = at.parent) names.unshift(at.name());
  return names.join(" ");
}

/**
 * `help [command...]`: help for a command at any depth (`help teams create`). commander's own
 * help command reads only the first name and shows that group's help. Its presence also turns
 * commander's off at the top; the groups keep theirs (`teams help create`).
 */
function addHelpCommand(program: Command): void {
  program
    .command("help [command...]")
    .description("display help for a command or group")
    .addHelpText("after", examples("consentctl help teams create", "consentctl help logs"))
    .action((names: string[], _options: unknown, help: Command) => {
      let target = program;
      for (const name of names) {
        const sub = findCommand(target, name);
        if (!sub) {
          help.error(`error: unknown command '${names.join(" ")}'`, {
            code: "commander.unknownCommand",
          });
        }
        target = sub;
      }
      target.outputHelp();
    });
}

/**
 * A group's help command (`teams help create`) as commander's own (`help [command]`), but a
 * command of the group's like the others: its own help names it `consentctl teams help` and is
 * written where the group's is (commander makes its help command with neither).
 */
function addGroupHelpCommand(group: Command): void {
  const help = group
    .createCommand("help")
    .copyInheritedSettings(group)
    .helpOption(false)
    .argument("[command]")
    .description("display help for command");
  help.parent = group;
  group.addHelpCommand(help);
}

/**
 * An empty --token (an unset shell variable) is a mistake, not a wish for the file's token; so is
 * one no header can carry (metadataValue).
 */
const tokenValue = metadataValue("the token");
