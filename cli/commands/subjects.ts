import type { Command } from "commander";
import { teamOption } from "#cli/commands/teams.js";
import { examples, messageJson } from "#cli/format.js";
import { nonEmpty, serviceId } from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import { snapshotJson } from "#gateway/json.js";
import {
  DeleteSubjectStateResponseSchema,
  type ResolveSubjectResponse,
} from "#gen/consent/v1/subject_pb.js";

interface SubjectOptions {
  team: string;
  banner: string;
  namespace?: string;
  subject: string;
}

const SUBJECTS_HINT =
  "--banner takes the public id of an active banner of the team (see `consentctl banners list --team TEAM_ID`)";

const HASHING_NOTE = `
The subject id is sent to the daemon, which hashes it (HMAC-SHA256 under
CONSENT_IDENTITY_KEY, with team, banner and namespace) and never stores it;
consentctl keeps no copy either.`;

function addSubjectOptions(command: Command): Command {
  return command
    .addOption(teamOption("team id (sent as consent-team metadata)"))
    .requiredOption(
      "--banner <public-id>",
      "public banner id (the one in the loader URL)",
      serviceId("the banner's public id"),
    )
    .option("--namespace <namespace>", 'subject namespace, 1-64 characters (default: "default")')
    .requiredOption(
      "--subject <subject-id>",
      "the integrator's subject id, 1-256 characters, no @",
      nonEmpty("the subject id"),
    )
    .addHelpText("after", HASHING_NOTE);
}

/**
 * A resolved subject as `--json` prints it: what REST's resolve answers as `data` (spec 4.5), the
 * snapshot's fields (spec 2.3) beside `found: true`, written by the gateway's own code; no
 * snapshot is `{ found: false }` and nothing else (decisions §4).
 */
function resolvedJson({ found, snapshot }: ResolveSubjectResponse) {
  if (!found || !snapshot) return { found: false };
  return { found: true, ...snapshotJson(snapshot) };
}

function reference(options: SubjectOptions) {
  return { bannerId: options.banner, namespace: options.namespace, subjectId: options.subject };
}

/** `subjects resolve|delete`: a subject's cross-device consent state, as an operator. */
export function registerSubjectCommands(program: Command, runtime: Runtime): void {
  const subjects = program
    .command("subjects")
    .description("read or erase a subject's cross-device consent state (e.g. for a data request)");

  addSubjectOptions(
    subjects.command("resolve").description("show the consent state stored for a subject"),
  )
    .addHelpText(
      "after",
      examples("consentctl subjects resolve --team TEAM_ID --banner PUBLIC_ID --subject user-42"),
    )
    .action((options: SubjectOptions, command: Command) =>
      runtime.run(command, {
        progress: "Resolving subject…",
        auth: "operator",
        call: ({ client }) => client.subjects(options.team).resolveSubject(reference(options)),
        json: resolvedJson,
        view: async () => (await import("#cli/views/subject-views.js")).subjectView(),
        notFoundHint: SUBJECTS_HINT,
      }),
    );

  addSubjectOptions(
    subjects.command("delete").description("erase the consent state stored for a subject"),
  )
    .addHelpText(
      "after",
      examples(
        "consentctl subjects delete --team TEAM_ID --banner PUBLIC_ID --namespace shop --subject user-42",
      ),
    )
    .action((options: SubjectOptions, command: Command) =>
      runtime.run(command, {
        progress: "Deleting subject state…",
        auth: "operator",
        call: ({ client }) => client.subjects(options.team).deleteSubjectState(reference(options)),
        json: (result) => messageJson(DeleteSubjectStateResponseSchema, result),
        view: async () => (await import("#cli/views/subject-views.js")).subjectDeletedView(),
        notFoundHint: SUBJECTS_HINT,
      }),
    );
}
