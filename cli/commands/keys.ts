import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Command, Option } from "commander";
import { TEAMS_HINT, teamOption } from "#cli/commands/teams.js";
import { examples, messageJson, required } from "#cli/format.js";
import {
  durationIn,
  formatDuration,
  listOf,
  parseIsoDateTime,
  serviceId,
} from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import type { CommandSpec } from "#cli/run-command.js";
import type { MintedKey } from "#cli/views/key-views.js";
import { KEY_GRACE_SECONDS } from "#daemon/admin/admin-rules.js";
import { SCOPES } from "#daemon/auth/scopes.js";
import { ApiKeySchema } from "#gen/consent/v1/admin_pb.js";

const KEYS_HINT = "list a team's keys and their ids with `consentctl keys list --team TEAM_ID`";

/** create and rotate: the new key with its secret under `key` (shown only here). */
function mintedSpec(
  progress: string,
  call: CommandSpec<MintedKey>["call"],
): CommandSpec<MintedKey> {
  return {
    progress,
    auth: "operator",
    call,
    json: ({ apiKey, secret, previous }) => ({
      ...(messageJson(ApiKeySchema, apiKey) as object),
      key: secret,
      ...(previous ? { previous: messageJson(ApiKeySchema, previous) } : {}),
    }),
    view: async () => (await import("#cli/views/key-views.js")).mintedKeyView(),
    notFoundHint: KEYS_HINT,
  };
}

interface CreateOptions {
  team: string;
  env: "live" | "test";
  scopes: string[];
  name: string;
  expiresAt?: Date;
}

function addCreateKey(keys: Command, runtime: Runtime): void {
  keys
    .command("create")
    .description("mint an API key; the full key is printed once and never again")
    .addOption(teamOption("team id"))
    .addOption(
      new Option("--env <environment>", "live, or test (read-only)")
        .choices(["live", "test"])
        .makeOptionMandatory(),
    )
    .requiredOption(
      "--scopes <list>",
      `comma-separated: ${SCOPES.join(", ")}`,
      listOf("scope", SCOPES),
    )
    .option("--name <name>", "free text to recognise the key by", "")
    .option("--expires-at <iso>", "expiry, ISO 8601 with a zone (default: never)", parseIsoDateTime)
    .addHelpText(
      "after",
      examples(
        "consentctl keys create --team TEAM_ID --env live --scopes banners:read,consent:read --name website",
        "consentctl keys create --team TEAM_ID --env test --scopes banners:read --expires-at 2099-12-31T23:59:59Z --json",
      ),
    )
    .action((options: CreateOptions, command: Command) =>
      runtime.run(command, {
        ...mintedSpec("Minting key…", async ({ client }) => {
          const response = await client.admin.createApiKey({
            teamId: options.team,
            environment: options.env,
            scopes: options.scopes,
            name: options.name,
            expiresAt: options.expiresAt && timestampFromDate(options.expiresAt),
          });
          return { apiKey: required(response.apiKey, "apiKey"), secret: response.secret };
        }),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

/** `keys create|list|revoke|rotate`: API keys of a team (decisions §2). */
export function registerKeyCommands(program: Command, runtime: Runtime): void {
  const keys = program
    .command("keys")
    .description("mint, list, revoke and rotate a team's API keys");
  addCreateKey(keys, runtime);
  addListKeys(keys, runtime);
  addRevokeKey(keys, runtime);
  addRotateKey(keys, runtime);
}

function addListKeys(keys: Command, runtime: Runtime): void {
  keys
    .command("list")
    .description("list a team's keys (without secrets), newest first")
    .addOption(teamOption("team id"))
    .addHelpText("after", examples("consentctl keys list --team TEAM_ID"))
    .action((options: { team: string }, command: Command) =>
      runtime.run(command, {
        progress: "Listing keys…",
        auth: "operator",
        call: async ({ client }) =>
          (await client.admin.listApiKeys({ teamId: options.team })).apiKeys,
        json: (list) => ({ keys: list.map((key) => messageJson(ApiKeySchema, key)) }),
        view: async () => (await import("#cli/views/key-views.js")).keysView(),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addRevokeKey(keys: Command, runtime: Runtime): void {
  keys
    .command("revoke")
    .description("revoke a key at once; later calls with it fail with revoked_key")
    .argument("<key-id>", "key id (from `keys list`), not the key itself", serviceId("the key id"))
    .addHelpText("after", examples("consentctl keys revoke KEY_ID"))
    .action((id: string, _options: unknown, command: Command) => {
      return runtime.run(command, {
        progress: "Revoking key…",
        auth: "operator",
        call: async ({ client }) =>
          required((await client.admin.revokeApiKey({ id })).apiKey, "apiKey"),
        json: (key) => messageJson(ApiKeySchema, key),
        view: async () => (await import("#cli/views/key-views.js")).keyView(),
        notFoundHint: KEYS_HINT,
      });
    });
}

function addRotateKey(keys: Command, runtime: Runtime): void {
  keys
    .command("rotate")
    .description(
      "mint a replacement key (same team, environment, name, scopes and expiry); the old key keeps working for the grace period",
    )
    .argument("<key-id>", "id of the key to replace", serviceId("the key id"))
    .requiredOption(
      "--grace <duration>",
      "how long the old key keeps working, up to 90d: 24h, 30m, 7d, or 0 to stop it now",
      durationIn(KEY_GRACE_SECONDS.min, KEY_GRACE_SECONDS.max),
    )
    .addHelpText(
      "after",
      examples(
        "consentctl keys rotate KEY_ID --grace 24h",
        "consentctl keys rotate KEY_ID --grace 0 --json",
      ),
    )
    .action((id: string, options: { grace: number }, command: Command) => {
      return runtime.run(
        command,
        mintedSpec(`Rotating key (grace ${formatDuration(options.grace)})…`, async ({ client }) => {
          const response = await client.admin.rotateApiKey({
            id,
            gracePeriodSeconds: options.grace,
          });
          return {
            apiKey: required(response.apiKey, "apiKey"),
            secret: response.secret,
            previous: response.previous,
          };
        }),
      );
    });
}
