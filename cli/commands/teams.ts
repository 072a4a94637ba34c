import { Argument, type Command, Option } from "commander";
import { examples, messageJson, required } from "#cli/format.js";
import { serviceId } from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import type { CommandSpec } from "#cli/run-command.js";
import { PLANS } from "#daemon/teams/team-store.js";
import { type Team, TeamSchema } from "#gen/consent/v1/admin_pb.js";

/** Where an operator finds team ids; shared by every command that takes one. */
export const TEAMS_HINT = "list the teams and their ids with `consentctl teams list`";
/** `--team` help of the team-scoped commands (banners, webhooks). */
export const TEAM_HELP = "team id (the operator acts for this team: sent as consent-team metadata)";

/** `--team <id>`: required and never empty, with `help` (TEAM_HELP unless the command says less). */
export function teamOption(help = TEAM_HELP): Option {
  return new Option("--team <id>", help).makeOptionMandatory().argParser(serviceId("the team id"));
}

function teamSpec(
  progress: string,
  title: string | undefined,
  call: CommandSpec<Team>["call"],
): CommandSpec<Team> {
  return {
    progress,
    auth: "operator",
    call,
    json: (team) => messageJson(TeamSchema, team),
    view: async () => (await import("#cli/views/team-views.js")).teamView(title),
    notFoundHint: TEAMS_HINT,
  };
}

/** `teams create|list|show|set-plan`: the AdminService team calls. */
export function registerTeamCommands(program: Command, runtime: Runtime): void {
  const teams = program
    .command("teams")
    .description("create and inspect teams; a team owns banners and keys, its plan sets limits");
  addCreateTeam(teams, runtime);
  addListTeams(teams, runtime);
  addShowTeam(teams, runtime);
  addSetPlan(teams, runtime);
}

function addCreateTeam(teams: Command, runtime: Runtime): void {
  teams
    .command("create")
    .description("create a team on a plan")
    .requiredOption("--name <name>", "team name, 1-255 characters")
    .addOption(new Option("--plan <plan>", "plan").choices(PLANS).makeOptionMandatory())
    .addHelpText("after", examples('consentctl teams create --name "Acme Ltd" --plan professional'))
    .action((options: { name: string; plan: string }, command: Command) =>
      runtime.run(
        command,
        teamSpec("Creating team…", "Team created", async ({ client }) =>
          required((await client.admin.createTeam(options)).team, "team"),
        ),
      ),
    );
}

function addListTeams(teams: Command, runtime: Runtime): void {
  teams
    .command("list")
    .description("list every team, oldest first")
    .addHelpText("after", examples("consentctl teams list", "consentctl teams list --json"))
    .action((_options: unknown, command: Command) =>
      runtime.run(command, {
        progress: "Listing teams…",
        auth: "operator",
        call: async ({ client }) => (await client.admin.listTeams({})).teams,
        json: (list) => ({ teams: list.map((team) => messageJson(TeamSchema, team)) }),
        view: async () => (await import("#cli/views/team-views.js")).teamsView(),
      }),
    );
}

function addShowTeam(teams: Command, runtime: Runtime): void {
  teams
    .command("show")
    .description("show one team")
    .argument("<id>", "team id", serviceId("the team id"))
    .addHelpText("after", examples("consentctl teams show 6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10"))
    .action((id: string, _options: unknown, command: Command) =>
      runtime.run(
        command,
        teamSpec("Reading team…", undefined, async ({ client }) =>
          required((await client.admin.getTeam({ id })).team, "team"),
        ),
      ),
    );
}

function addSetPlan(teams: Command, runtime: Runtime): void {
  teams
    .command("set-plan")
    .description("move a team to another plan; limits and the cross-device gate follow at once")
    .argument("<id>", "team id", serviceId("the team id"))
    .addArgument(new Argument("<plan>", "new plan").choices(PLANS))
    .addHelpText(
      "after",
      examples("consentctl teams set-plan 6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10 business"),
    )
    .action((id: string, plan: string, _options: unknown, command: Command) =>
      runtime.run(
        command,
        teamSpec("Changing plan…", "Plan changed", async ({ client }) =>
          required((await client.admin.setTeamPlan({ id, plan })).team, "team"),
        ),
      ),
    );
}
