import type { Command } from "commander";
import { entryJson } from "#cli/commands/log-export-format.js";
import { addRangeOptions, filterRequest, type LogRangeOptions } from "#cli/commands/log-filters.js";
import { addExportLogs, addTailLogs } from "#cli/commands/log-streams.js";
import { TEAMS_HINT } from "#cli/commands/teams.js";
import { examples } from "#cli/format.js";
import { integerIn } from "#cli/option-parsers.js";
import type { Runtime } from "#cli/program.js";
import type { LogPage, LogStats } from "#cli/views/log-views.js";

/** `logs list|tail|stats|export`: the consent log of a team, as proof of consent. */
export function registerLogCommands(program: Command, runtime: Runtime): void {
  const logs = program
    .command("logs")
    .description("read a team's consent log: list, follow live, count, export as proof");
  addListLogs(logs, runtime);
  addTailLogs(logs, runtime);
  addStatsLogs(logs, runtime);
  addExportLogs(logs, runtime);
}

interface ListOptions extends LogRangeOptions {
  limit: number;
  pageToken?: string;
}

function addListLogs(logs: Command, runtime: Runtime): void {
  addRangeOptions(
    logs.command("list").description("list consent log rows, newest first, one page at a time"),
  )
    .option("--limit <n>", "rows per page, 1-1000", integerIn(1, 1000), 50)
    .option("--page-token <token>", "the next page, as printed after the previous one")
    .addHelpText(
      "after",
      examples(
        "consentctl logs list --team TEAM_ID --since 24h",
        "consentctl logs list --team TEAM_ID --banner PUBLIC_ID --method accept_all,consent_given --json",
      ),
    )
    .action((options: ListOptions, command: Command) =>
      runtime.run<LogPage>(command, {
        progress: "Reading consent log…",
        auth: "operator",
        call: async ({ client }) => {
          // The store bounds the read (query_too_broad past it, at CONSENT_MONGODB_TIMEOUT_MS or
          // CONSENT_LOG_READ_TIMEOUT_MS): no call limit cuts its answer short.
          const response = await client.logs(options.team, { untimed: true }).listConsentLogs({
            ...(await filterRequest(client, options)),
            pageSize: options.limit,
            pageToken: options.pageToken ?? "",
          });
          return { entries: response.entries, nextPageToken: response.nextPageToken };
        },
        json: (page) => ({
          entries: page.entries.map(entryJson),
          nextPageToken: page.nextPageToken,
        }),
        view: async () =>
          (await import("#cli/views/log-views.js")).logPageView({
            oneBanner: options.banner !== undefined,
          }),
        notFoundHint: TEAMS_HINT,
      }),
    );
}

function addStatsLogs(logs: Command, runtime: Runtime): void {
  addRangeOptions(
    logs
      .command("stats")
      .description(
        "count rows by method and by UTC day, and the opt-in rate: the share of explicit choices (every method but consent_default) that accepted at least one category the banner does not require",
      ),
  )
    .addHelpText(
      "after",
      examples(
        "consentctl logs stats --team TEAM_ID --since 30d",
        "consentctl logs stats --team TEAM_ID --banner PUBLIC_ID --since 2026-05-01T00:00:00Z --until 2026-06-01T00:00:00Z --json",
      ),
    )
    .action((options: LogRangeOptions, command: Command) =>
      runtime.run<LogStats>(command, {
        progress: "Counting consent log rows…",
        auth: "operator",
        call: async ({ client }) => {
          // The store bounds the count (query_too_broad past it, at CONSENT_MONGODB_TIMEOUT_MS or
          // CONSENT_LOG_READ_TIMEOUT_MS): no call limit cuts its answer short.
          const stats = await client
            .logs(options.team, { untimed: true })
            .consentLogStats(await filterRequest(client, options));
          return {
            total: Number(stats.total),
            byMethod: Object.fromEntries(
              Object.entries(stats.byMethod).map(([method, count]) => [method, Number(count)]),
            ),
            byDay: stats.byDay.map(({ day, count }) => ({ day, count: Number(count) })),
            explicitChoices: Number(stats.explicitChoices),
            optedIn: Number(stats.optedIn),
            optInRate: stats.optInRate,
          };
        },
        json: (stats) => stats,
        view: async () => (await import("#cli/views/log-views.js")).logStatsView(),
        notFoundHint: TEAMS_HINT,
      }),
    );
}
