import type { Command } from "commander";
import {
  addBannerFieldOptions,
  type BannerFieldOptions,
  bannerBody,
  encodeBody,
  hasBannerFields,
} from "#cli/commands/banner-body.js";
import { bannerJson } from "#cli/commands/banner-loader.js";
import { TEAMS_HINT, teamOption } from "#cli/commands/teams.js";
import { examples, required } from "#cli/format.js";
import { serviceId } from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import type { CommandSpec, Invocation } from "#cli/run-command.js";
import type { BannerResult } from "#cli/views/banner-views.js";
import { colorRolesOf, contrastShortfalls } from "#daemon/banners/colors.js";
import { shortfallMessage } from "#daemon/banners/contrast.js";
import type { Banner } from "#gen/consent/v1/banner_pb.js";

interface TeamOption {
  team: string;
}

/** A command answering with one banner: printed with its loader snippet. */
function bannerSpec(
  progress: string,
  title: string | undefined,
  call: (invocation: Invocation) => Promise<Banner | undefined>,
): CommandSpec<BannerResult> {
  return {
    progress,
    auth: "operator",
    call: async (invocation) => ({
      banner: required(await call(invocation), "banner"),
      baseUrl: invocation.context.baseUrl,
    }),
    json: ({ banner, baseUrl }) => bannerJson(banner, baseUrl),
    view: async () => (await import("#cli/views/banner-views.js")).bannerView(title),
    notFoundHint: BANNERS_HINT,
  };
}

/**
 * The configuration's colour pairs that fail WCAG 2.2 AA, in words: a warning, not a refusal
 * (the write is kept; the operator decides), as the runtime warns in the console.
 */
function contrastWarnings({ configuration }: Banner): string[] {
  if (!configuration) return [];
  return contrastShortfalls(colorRolesOf(configuration)).map(shortfallMessage);
}

/** create and update: a banner written, and warnings of its colours' contrast. */
function writtenBannerSpec(
  progress: string,
  title: string,
  call: (invocation: Invocation) => Promise<Banner | undefined>,
): CommandSpec<BannerResult & { warnings: string[] }> {
  const spec = bannerSpec(progress, title, call);
  return {
    ...spec,
    call: async (invocation) => {
      const result = await spec.call(invocation);
      return { ...result, warnings: contrastWarnings(result.banner) };
    },
    json: (result) => ({ ...(spec.json(result) as object), warnings: result.warnings }),
    warnings: (result) => result.warnings,
  };
}

const BANNERS_HINT =
  "list the team's banners with `consentctl banners list --team TEAM_ID` (and teams with `consentctl teams list`)";

/** `banners list|show|create|update|publish|activate|deactivate`, as an operator for a team. */
export function registerBannerCommands(program: Command, runtime: Runtime): void {
  const banners = program
    .command("banners")
    .description("manage a team's consent banners (operator token plus --team)");
  addListBanners(banners, runtime);
  addShowBanner(banners, runtime);
  addCreateBanner(banners, runtime);
  addUpdateBanner(banners, runtime);
  registerStateCommands(banners, runtime);
}

/** publish, activate and deactivate: one-call changes of a banner's public state. */
function registerStateCommands(banners: Command, runtime: Runtime): void {
  const changes = [
    {
      name: "publish",
      description: "copy the draft configuration to production (the loader serves production)",
      progress: "Publishing…",
      title: "Banner published",
      call: (i: Invocation, team: string, id: string) =>
        i.client.banners(team).publishBanner({ id }),
    },
    {
      name: "activate",
      description: "make the banner visible again: loader, log route and subject calls answer",
      progress: "Activating…",
      title: "Banner activated",
      call: (i: Invocation, team: string, id: string) =>
        i.client.banners(team).updateBanner({ id, isActive: true }),
    },
    {
      name: "deactivate",
      description: "hide the banner: its loader, log route and subject calls answer 404",
      progress: "Deactivating…",
      title: "Banner deactivated",
      call: (i: Invocation, team: string, id: string) =>
        i.client.banners(team).updateBanner({ id, isActive: false }),
    },
  ];
  for (const change of changes) {
    banners
      .command(change.name)
      .description(change.description)
      .argument("<banner-id>", "banner id", serviceId("the banner id"))
      .addOption(teamOption())
      .addHelpText("after", examples(`consentctl banners ${change.name} BANNER_ID --team TEAM_ID`))
      .action((id: string, options: TeamOption, command: Command) =>
        runtime.run(
          command,
          bannerSpec(
            change.progress,
            change.title,
            async (invocation) => (await change.call(invocation, options.team, id)).banner,
          ),
        ),
      );
  }
}

function addListBanners(banners: Command, runtime: Runtime): void {
  banners
    .command("list")
    .description("list a team's banners, oldest first")
    .addOption(teamOption())
    .addHelpText("after", examples("consentctl banners list --team TEAM_ID"))
    .action((options: TeamOption, command: Command) =>
      runtime.run(command, {
        progress: "Listing banners…",
        auth: "operator",
        call: async ({ client, context }) => ({
          banners: (await client.banners(options.team).listBanners({})).banners,
          baseUrl: context.baseUrl,
        }),
        json: ({ banners: list, baseUrl }) => ({
          banners: list.map((b) => bannerJson(b, baseUrl)),
        }),
        view: async () => (await import("#cli/views/banner-views.js")).bannersView(),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addShowBanner(banners: Command, runtime: Runtime): void {
  banners
    .command("show")
    .description("show a banner and the loader snippet for its pages")
    .argument(
      "<banner-id>",
      "banner id (internal id, from `banners list`)",
      serviceId("the banner id"),
    )
    .addOption(teamOption())
    .addHelpText("after", examples("consentctl banners show BANNER_ID --team TEAM_ID"))
    .action((id: string, options: TeamOption, command: Command) =>
      runtime.run(
        command,
        bannerSpec(
          "Reading banner…",
          undefined,
          async ({ client }) => (await client.banners(options.team).getBanner({ id })).banner,
        ),
      ),
    );
}

function addCreateBanner(banners: Command, runtime: Runtime): void {
  addBannerFieldOptions(
    banners
      .command("create")
      .description("create a banner; its configuration is published at once as revision 1")
      .addOption(teamOption()),
    "create",
  )
    .addHelpText(
      "after",
      examples(
        "consentctl banners create --team TEAM_ID --name Main --domain example.com",
        "consentctl banners create --team TEAM_ID --name Shop --domain shop.example.com --layout modal --primary-color '#0a7' --config banner.json",
      ),
    )
    .action((options: BannerFieldOptions & TeamOption, command: Command) =>
      runtime.run(
        command,
        writtenBannerSpec("Creating banner…", "Banner created", async ({ client }) => {
          const json = encodeBody(await bannerBody(options, "create"));
          return (await client.banners(options.team).createBanner({ json })).banner;
        }),
      ),
    );
}

function addUpdateBanner(banners: Command, runtime: Runtime): void {
  addBannerFieldOptions(
    banners
      .command("update")
      .description(
        "edit a banner: name, domain and compliance apply at once; configuration edits the draft",
      )
      .argument("<banner-id>", "banner id", serviceId("the banner id"))
      .addOption(teamOption()),
    "update",
  )
    .addHelpText(
      "after",
      examples(
        "consentctl banners update BANNER_ID --team TEAM_ID --position top --text-color '#222'",
        "consentctl banners update BANNER_ID --team TEAM_ID --config banner.json && consentctl banners publish BANNER_ID --team TEAM_ID",
      ),
    )
    .action((id: string, options: BannerFieldOptions & TeamOption, command: Command) => {
      if (!hasBannerFields(options)) {
        command.error("error: nothing to update: pass at least one field option");
      }
      return runtime.run(
        command,
        writtenBannerSpec("Updating banner…", "Banner updated", async ({ client }) => {
          const json = encodeBody(await bannerBody(options, "update"));
          return (await client.banners(options.team).updateBanner({ id, json })).banner;
        }),
      );
    });
}
