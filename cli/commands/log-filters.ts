import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Command, InvalidArgumentError, Option } from "commander";
import { checkPublicBannerIds } from "#cli/commands/banner-public-ids.js";
import { teamOption } from "#cli/commands/teams.js";
import type { DaemonClient } from "#cli/daemon-client.js";
import { listOf, parseTimeBound, serviceId } from "#cli/option-parsers.js";
import { UserError } from "#cli/problems.js";
import { CONSENT_LOG_METHODS } from "#daemon/consent-log/consent-log-rules.js";
import { UUID_PATTERN } from "#daemon/validation/patterns.js";

/** The filters every `logs` command takes. */
export interface LogFilterOptions {
  team: string;
  banner?: string;
  method?: string[];
  consentId?: string;
}

/** The filters of commands over a time range (list, stats, export). */
export interface LogRangeOptions extends LogFilterOptions {
  since?: Date;
  until?: Date;
}

export const LOGS_HINT =
  "check the team id with `consentctl teams list` and the banner's public id with `consentctl banners list --team TEAM_ID`";

/** Reads --consent-id: a UUID, as the log route takes a consentId. */
function consentIdOf(value: string): string {
  if (!UUID_PATTERN.test(value)) {
    throw new InvalidArgumentError(
      `"${value}" is no consentId: a consentId is a UUID, as in the consent cookie and the log's rows.`,
    );
  }
  return value.toLowerCase();
}

/** --team, --banner, --method and --consent-id, on every logs command. */
export function addFilterOptions(command: Command): Command {
  return command
    .addOption(teamOption("team id (sent as consent-team metadata)"))
    .option(
      "--banner <public-id>",
      "only rows of this banner (its public id)",
      serviceId("the banner's public id"),
    )
    .option(
      "--method <list>",
      `only these methods, comma-separated: ${CONSENT_LOG_METHODS.join(", ")}`,
      listOf("method", CONSENT_LOG_METHODS),
    )
    .option(
      "--consent-id <uuid>",
      "only rows of this consent record: one visitor's choices, as their consent cookie names it",
      consentIdOf,
    );
}

/** --since and --until: ISO 8601 with a zone, or a duration before now. */
export function addRangeOptions(command: Command): Command {
  // One "now" for both bounds: `--since 1h --until 1h` is the empty range it reads as.
  let now: Date | undefined;
  const bound = (value: string) => {
    now ??= new Date();
    return parseTimeBound(value, now);
  };
  return addFilterOptions(command)
    .addOption(
      new Option(
        "--since <when>",
        "rows received at or after: 2026-05-01T00:00:00Z, or a duration ago such as 24h or 7d",
      ).argParser(bound),
    )
    .addOption(
      new Option("--until <when>", "rows received before: a date-time or a duration ago").argParser(
        bound,
      ),
    )
    .hook("preAction", (_program, action) => {
      // An empty range is a mistake in the command line, not a query with no rows.
      const { since, until } = action.opts<LogRangeOptions>();
      if (since && until && since >= until) {
        action.error(
          `error: --since (${since.toISOString()}) must be before --until (${until.toISOString()}); a duration counts back from now, so --since 2h --until 1h is the hour before last.`,
          { exitCode: 2, code: "consentctl.emptyRange" },
        );
      }
    });
}

/**
 * The request fields of the shared filters. `--banner` is checked against the team's banners
 * first: rows carry a banner's public id, so any other value selects nothing without a word, and
 * the likely slip, the banner's own id (the one `banners` commands take), is named as such.
 */
export async function filterRequest(
  client: DaemonClient,
  options: LogRangeOptions,
  signal?: AbortSignal,
) {
  if (options.banner) {
    const [unknown] = await checkPublicBannerIds(
      client,
      options.team,
      [options.banner],
      "--banner",
      signal,
    );
    if (unknown !== undefined) {
      throw new UserError(
        `The team has no banner with public id ${unknown}.`,
        LOGS_HINT,
        "not_found",
      );
    }
  }
  return {
    bannerId: options.banner ?? "",
    methods: options.method ?? [],
    consentId: options.consentId ?? "",
    since: options.since && timestampFromDate(options.since),
    until: options.until && timestampFromDate(options.until),
  };
}
