import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { Argument, type Command, Option } from "commander";
import { checkPublicBannerIds } from "#cli/commands/banner-public-ids.js";
import { TEAMS_HINT, teamOption } from "#cli/commands/teams.js";
import type { DaemonClient } from "#cli/daemon-client.js";
import { examples, messageJson, required } from "#cli/format.js";
import {
  durationIn,
  integerIn,
  parseList,
  parseTimeBound,
  serviceId,
} from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import type { CommandSpec, Invocation } from "#cli/run-command.js";
import type { DeliveryPage, ReplayResult } from "#cli/views/webhook-views.js";
import { MAX_GRACE_SECONDS } from "#daemon/webhooks/webhook-rules.js";
import {
  DeliverySchema,
  type TestWebhookResponse,
  TestWebhookResponseSchema,
  type Webhook,
  WebhookSchema,
} from "#gen/consent/v1/webhook_pb.js";

const WEBHOOKS_HINT =
  "list the team's endpoints with `consentctl webhooks list --team TEAM_ID` (and teams with `consentctl teams list`)";
const DELIVERIES_HINT =
  "list the endpoint's deliveries with `consentctl webhooks deliveries WEBHOOK_ID --team TEAM_ID`";
/** `<webhook-id>`: an endpoint's id, never empty. */
function webhookId(description = "endpoint id"): Argument {
  return new Argument("<webhook-id>", description).argParser(serviceId("the endpoint id"));
}

const EVENTS_HELP = "comma-separated event types (today only consent.given)";
const BANNERS_HELP =
  "comma-separated public banner ids (the ones in the loader URL) whose events are delivered";

/**
 * Runs `write` (a create or update with `--banners`), which the daemon refuses for a value that
 * is not a public id of the team's banners (invalid_argument): only then are the values checked
 * against the team's banners, so a banner's own id, a likely slip, is refused naming its public
 * id; the daemon's refusal stands for any other value. A write it takes costs no listing.
 */
async function namingPublicIds<T>(
  client: DaemonClient,
  team: string,
  banners: string[] | undefined,
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (banners?.length && ConnectError.from(error).code === Code.InvalidArgument) {
      await checkPublicBannerIds(client, team, banners, "--banners");
    }
    throw error;
  }
}

interface TeamOption {
  team: string;
}

/**
 * A webhook as JSON, with the fields REST gives it (docs/webhooks.md): decisions §8, the secret
 * is set only in the answer that created or rotated it, elsewhere left out, so no script mistakes
 * "" for a secret; `disabledReason` is `null` while the endpoint is enabled, as the unset times.
 */
function webhookJson(webhook: Webhook): Record<string, unknown> {
  const { secret, ...rest } = messageJson(WebhookSchema, webhook) as Record<string, unknown>;
  const fields = { ...rest, disabledReason: webhook.disabledReason || null };
  return secret ? { ...fields, secret } : fields;
}

/** A command answering with one endpoint; `title` heads the human view. */
function webhookSpec(
  progress: string,
  title: string | undefined,
  call: (invocation: Invocation) => Promise<Webhook | undefined>,
): CommandSpec<Webhook> {
  return {
    progress,
    auth: "operator",
    call: async (invocation) => required(await call(invocation), "webhook"),
    json: webhookJson,
    view: async () => (await import("#cli/views/webhook-views.js")).webhookView(title),
    notFoundHint: WEBHOOKS_HINT,
  };
}

/**
 * `webhooks add|list|show|update|remove|test|deliveries|replay`: a team's webhook endpoints and
 * their deliveries (spec 1.4 and 6, decisions §8), over WebhookService as an operator for a team.
 */
export function registerWebhookCommands(program: Command, runtime: Runtime): void {
  const webhooks = program
    .command("webhooks")
    .description(
      "manage a team's webhook endpoints and their deliveries (operator token plus --team)",
    );
  addCreateWebhook(webhooks, runtime);
  addListWebhooks(webhooks, runtime);
  addShowWebhook(webhooks, runtime);
  addUpdateWebhook(webhooks, runtime);
  addRemoveWebhook(webhooks, runtime);
  addTestWebhook(webhooks, runtime);
  addListDeliveries(webhooks, runtime);
  addReplayDeliveries(webhooks, runtime);
}

interface AddOptions extends TeamOption {
  url: string;
  events?: string[];
  banners?: string[];
  description: string;
}

function addCreateWebhook(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("add")
    .description("subscribe an endpoint; its whsec_ signing secret is printed once and never again")
    .addOption(teamOption())
    .requiredOption(
      "--url <url>",
      "https URL (http only for hosts inside CONSENT_WEBHOOK_ALLOW_CIDRS)",
    )
    .option("--events <list>", `${EVENTS_HELP} (default: consent.given)`, parseList)
    .option("--banners <list>", `${BANNERS_HELP} (default: every banner)`, parseList)
    .option("--description <text>", "free text to recognise the endpoint by", "")
    .addHelpText(
      "after",
      examples(
        "consentctl webhooks add --team TEAM_ID --url https://crm.example.com/hooks/consent",
        "consentctl webhooks add --team TEAM_ID --url https://hooks.example.com/c --banners PUBLIC_ID --description CRM --json",
      ),
    )
    .action((options: AddOptions, command: Command) =>
      runtime.run(command, {
        ...webhookSpec("Subscribing endpoint…", "Webhook endpoint created", async ({ client }) => {
          const response = await namingPublicIds(client, options.team, options.banners, () =>
            client.webhooks(options.team).createWebhook({
              url: options.url,
              eventTypes: options.events ?? [],
              bannerIds: options.banners ?? [],
              description: options.description,
            }),
          );
          return response.webhook;
        }),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addListWebhooks(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("list")
    .description("list a team's endpoints (without secrets), oldest first, with their state")
    .addOption(teamOption())
    .addHelpText("after", examples("consentctl webhooks list --team TEAM_ID"))
    .action((options: TeamOption, command: Command) =>
      runtime.run(command, {
        progress: "Listing endpoints…",
        auth: "operator",
        call: async ({ client }) => (await client.webhooks(options.team).listWebhooks({})).webhooks,
        json: (list) => ({ webhooks: list.map(webhookJson) }),
        view: async () => (await import("#cli/views/webhook-views.js")).webhooksView(),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addShowWebhook(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("show")
    .description("show an endpoint: enabled or disabled and why (410 Gone, 5 days failing)")
    .addArgument(webhookId("endpoint id (from `webhooks list`)"))
    .addOption(teamOption())
    .addHelpText("after", examples("consentctl webhooks show WEBHOOK_ID --team TEAM_ID"))
    .action((id: string, options: TeamOption, command: Command) =>
      runtime.run(
        command,
        webhookSpec(
          "Reading endpoint…",
          undefined,
          async ({ client }) => (await client.webhooks(options.team).getWebhook({ id })).webhook,
        ),
      ),
    );
}

interface UpdateOptions extends TeamOption {
  url?: string;
  events?: string[];
  banners?: string[];
  allBanners?: boolean;
  description?: string;
  enable?: boolean;
  disable?: boolean;
  rotateSecret?: boolean;
  grace?: number;
}

function addUpdateWebhook(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("update")
    .description(
      "edit an endpoint: URL, event types, banner filter, description, enable or disable, or rotate its secret",
    )
    .addArgument(webhookId())
    .addOption(teamOption())
    .option("--url <url>", "new URL")
    .option("--events <list>", EVENTS_HELP, parseList)
    .addOption(
      new Option("--banners <list>", `${BANNERS_HELP} (replaces the filter)`)
        .argParser(parseList)
        .conflicts("allBanners"),
    )
    .option("--all-banners", "drop the banner filter: deliver events of every banner")
    .option("--description <text>", "new description")
    .addOption(
      new Option(
        "--enable",
        "enable the endpoint (clears the disabled reason and failure record)",
      ).conflicts("disable"),
    )
    .option("--disable", "disable the endpoint: nothing is delivered until it is enabled again")
    .option(
      "--rotate-secret",
      "make a new signing secret, printed once; the old one keeps signing for --grace",
    )
    .option(
      "--grace <duration>",
      "with --rotate-secret: how long the old secret also signs, up to 7d (default 24h)",
      durationIn(0, MAX_GRACE_SECONDS),
    )
    .addHelpText(
      "after",
      examples(
        "consentctl webhooks update WEBHOOK_ID --team TEAM_ID --enable",
        "consentctl webhooks update WEBHOOK_ID --team TEAM_ID --rotate-secret --grace 24h --json",
        "consentctl webhooks update WEBHOOK_ID --team TEAM_ID --url https://new.example.com/hooks --all-banners",
      ),
    )
    .action((id: string, options: UpdateOptions, command: Command) => {
      if (options.grace !== undefined && !options.rotateSecret) {
        command.error("error: --grace applies only with --rotate-secret");
      }
      const enabled = options.enable ? true : options.disable ? false : undefined;
      const bannerIds = options.allBanners ? [] : options.banners;
      const changes = [options.url, options.events, bannerIds, options.description, enabled];
      if (changes.every((change) => change === undefined) && !options.rotateSecret) {
        command.error("error: nothing to update: pass at least one option");
      }
      const title = options.rotateSecret
        ? "Secret rotated (the old secret also signs until the time shown)"
        : "Webhook endpoint updated";
      return runtime.run(
        command,
        webhookSpec("Updating endpoint…", title, async ({ client }) => {
          const response = await namingPublicIds(client, options.team, bannerIds, () =>
            client.webhooks(options.team).updateWebhook({
              id,
              url: options.url,
              eventTypes: options.events && { values: options.events },
              bannerIds: bannerIds && { values: bannerIds },
              description: options.description,
              enabled,
              rotateSecret: options.rotateSecret,
              secretGracePeriodSeconds: options.grace,
            }),
          );
          return response.webhook;
        }),
      );
    });
}

function addRemoveWebhook(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("remove")
    .description("remove an endpoint; its pending deliveries are dropped")
    .addArgument(webhookId())
    .addOption(teamOption())
    .addHelpText("after", examples("consentctl webhooks remove WEBHOOK_ID --team TEAM_ID"))
    .action((id: string, options: TeamOption, command: Command) =>
      runtime.run(command, {
        progress: "Removing endpoint…",
        auth: "operator",
        call: async ({ client }) => ({
          id,
          deleted: (await client.webhooks(options.team).deleteWebhook({ id })).deleted,
        }),
        json: (result) => result,
        view: async () => (await import("#cli/views/webhook-views.js")).removedView(),
        notFoundHint: WEBHOOKS_HINT,
      }),
    );
}

function addTestWebhook(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("test")
    .description(
      "send one signed webhook.test event now and report the answer (exit 1 unless it was 2xx)",
    )
    .addArgument(webhookId())
    .addOption(teamOption())
    .addHelpText(
      "after",
      examples(
        "consentctl webhooks test WEBHOOK_ID --team TEAM_ID",
        "consentctl webhooks test WEBHOOK_ID --team TEAM_ID --json",
      ),
    )
    .action((id: string, options: TeamOption, command: Command) =>
      runtime.run<TestWebhookResponse>(command, {
        progress: "Sending a test event…",
        auth: "operator",
        call: ({ client }) => client.webhooks(options.team).testWebhook({ id }),
        json: (result) => messageJson(TestWebhookResponseSchema, result),
        view: async () => (await import("#cli/views/webhook-views.js")).testResultView(),
        exitCode: (result) => (result.success ? 0 : 1),
        notFoundHint: WEBHOOKS_HINT,
      }),
    );
}

interface DeliveriesOptions extends TeamOption {
  status?: string;
  limit: number;
  pageToken?: string;
}

function addListDeliveries(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("deliveries")
    .description(
      "list an endpoint's deliveries, newest first: attempts, pending retries and dead letters (failed)",
    )
    .addArgument(webhookId())
    .addOption(teamOption())
    .addOption(
      new Option("--status <status>", "only deliveries in this state").choices([
        "pending",
        "succeeded",
        "failed",
      ]),
    )
    .option("--limit <n>", "deliveries per page, 1-1000", integerIn(1, 1000), 100)
    .option("--page-token <token>", "the next page, as printed after the previous one")
    .addHelpText(
      "after",
      examples(
        "consentctl webhooks deliveries WEBHOOK_ID --team TEAM_ID",
        "consentctl webhooks deliveries WEBHOOK_ID --team TEAM_ID --status failed --json",
      ),
    )
    .action((id: string, options: DeliveriesOptions, command: Command) =>
      runtime.run<DeliveryPage>(command, {
        progress: "Listing deliveries…",
        auth: "operator",
        call: ({ client }) =>
          client.webhooks(options.team).listDeliveries({
            webhookId: id,
            status: options.status ?? "",
            pageSize: options.limit,
            pageToken: options.pageToken ?? "",
          }),
        json: (page) => ({
          deliveries: page.deliveries.map((delivery) => messageJson(DeliverySchema, delivery)),
          nextPageToken: page.nextPageToken,
        }),
        view: async () => (await import("#cli/views/webhook-views.js")).deliveriesView(),
        notFoundHint: WEBHOOKS_HINT,
      }),
    );
}

interface ReplayOptions extends TeamOption {
  failedSince?: Date;
}

function addReplayDeliveries(webhooks: Command, runtime: Runtime): void {
  webhooks
    .command("replay")
    .description("send deliveries again: one by id, or every failed one (dead letter) since a time")
    .addArgument(webhookId())
    .argument(
      "[delivery-id]",
      "one delivery to send again (from `webhooks deliveries`)",
      serviceId("the delivery id"),
    )
    .addOption(teamOption())
    .option(
      "--failed-since <time>",
      "every failed delivery created since: ISO 8601 with a zone, or a duration before now (24h, 7d)",
      (value: string) => parseTimeBound(value),
    )
    .addHelpText(
      "after",
      examples(
        "consentctl webhooks replay WEBHOOK_ID DELIVERY_ID --team TEAM_ID",
        "consentctl webhooks replay WEBHOOK_ID --team TEAM_ID --failed-since 24h",
        "consentctl webhooks replay WEBHOOK_ID --team TEAM_ID --failed-since 2026-05-01T00:00:00Z --json",
      ),
    )
    .action(
      (id: string, deliveryId: string | undefined, options: ReplayOptions, command: Command) => {
        if ((deliveryId === undefined) === (options.failedSince === undefined)) {
          command.error("error: name one delivery id or pass --failed-since, not both or neither");
        }
        return runtime.run<ReplayResult>(command, {
          progress: "Scheduling deliveries again…",
          auth: "operator",
          call: async ({ client }) => ({
            replayed: (
              await client.webhooks(options.team).replayDeliveries({
                webhookId: id,
                deliveryId: deliveryId ?? "",
                since: options.failedSince && timestampFromDate(options.failedSince),
              })
            ).replayed,
          }),
          json: (result) => result,
          view: async () => (await import("#cli/views/webhook-views.js")).replayView(),
          notFoundHint: deliveryId ? DELIVERIES_HINT : WEBHOOKS_HINT,
        });
      },
    );
}
