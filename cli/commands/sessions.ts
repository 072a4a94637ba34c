import type { Command } from "commander";
import { TEAMS_HINT, teamOption } from "#cli/commands/teams.js";
import { examples, messageJson, required } from "#cli/format.js";
import { durationIn, serviceId } from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import { SESSION_TTL_SECONDS } from "#daemon/admin/admin-rules.js";
import { SessionSchema } from "#gen/consent/v1/admin_pb.js";

/** `sessions create|list|revoke`: dashboard sessions for a team (decisions §2). */
export function registerSessionCommands(program: Command, runtime: Runtime): void {
  const sessions = program
    .command("sessions")
    .description("mint, list and revoke dashboard sessions (the consent_session cookie)");
  addCreateSession(sessions, runtime);
  addListSessions(sessions, runtime);
  addRevokeSession(sessions, runtime);
}

function addCreateSession(sessions: Command, runtime: Runtime): void {
  sessions
    .command("create")
    .description("mint a dashboard session for a team; its token is printed once")
    .addOption(teamOption("team id"))
    .option(
      "--ttl <duration>",
      "lifetime, 1m to 30d (default: 12h)",
      durationIn(SESSION_TTL_SECONDS.min, SESSION_TTL_SECONDS.max),
    )
    .addHelpText(
      "after",
      examples(
        "consentctl sessions create --team TEAM_ID",
        "consentctl sessions create --team TEAM_ID --ttl 2h --json",
      ),
    )
    .action((options: { team: string; ttl?: number }, command: Command) =>
      runtime.run(command, {
        progress: "Creating session…",
        auth: "operator",
        call: async ({ client }) => {
          const response = await client.admin.createSession({
            teamId: options.team,
            ttlSeconds: options.ttl,
          });
          return { session: required(response.session, "session"), token: response.token };
        },
        json: ({ session, token }) => ({
          ...(messageJson(SessionSchema, session) as object),
          token,
        }),
        view: async () => (await import("#cli/views/session-views.js")).newSessionView(),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addListSessions(sessions: Command, runtime: Runtime): void {
  sessions
    .command("list")
    .description("list a team's sessions that have not expired (never their tokens), newest first")
    .addOption(teamOption("team id"))
    .addHelpText("after", examples("consentctl sessions list --team TEAM_ID"))
    .action((options: { team: string }, command: Command) =>
      runtime.run(command, {
        progress: "Listing sessions…",
        auth: "operator",
        call: async ({ client }) =>
          (await client.admin.listSessions({ teamId: options.team })).sessions,
        json: (list) => ({
          sessions: list.map((session) => messageJson(SessionSchema, session)),
        }),
        view: async () => (await import("#cli/views/session-views.js")).sessionsView(),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addRevokeSession(sessions: Command, runtime: Runtime): void {
  sessions
    .command("revoke")
    .description("revoke a dashboard session at once")
    .argument(
      "<session-id>",
      "session id (from `sessions list` or `sessions create`)",
      serviceId("the session id"),
    )
    .addHelpText("after", examples("consentctl sessions revoke SESSION_ID"))
    .action((id: string, _options: unknown, command: Command) =>
      runtime.run(command, {
        progress: "Revoking session…",
        auth: "operator",
        call: async ({ client }) =>
          required((await client.admin.revokeSession({ id })).session, "session"),
        json: (session) => messageJson(SessionSchema, session),
        view: async () => (await import("#cli/views/session-views.js")).sessionView(),
        notFoundHint: "list a team's sessions with `consentctl sessions list --team TEAM_ID`",
      }),
    );
}
