import { stat } from "node:fs/promises";
import {
  checkHealth,
  type HealthReport,
  SUBJECTS_UNAVAILABLE,
  SUBJECTS_UNAVAILABLE_HINT,
  storeVerdict,
} from "#cli/commands/health-check.js";
import type { CheckResult } from "#cli/components/check-list.js";
import {
  type CommandContext,
  findOperatorToken,
  type GlobalOptions,
  tryLoadConfig,
} from "#cli/context.js";
import { createDaemonClient, type DaemonClient } from "#cli/daemon-client.js";
import { describeProblem, WRITES_REFUSED, WRITES_REFUSED_HINT } from "#cli/problems.js";
import { exposedFiles, operatorTokenProblem } from "#daemon/bootstrap.js";
import { ConfigError } from "#daemon/config.js";

/** Beyond this difference between local and daemon clocks, expiries and windows drift visibly. */
export const MAX_CLOCK_SKEW_MS = 30_000;

export interface DoctorInput {
  globals: GlobalOptions;
  context: CommandContext;
  /** A client without credentials, for the health call. */
  client: DaemonClient;
}

/**
 * Runs every check even after a failure, so one `doctor` run shows everything that is wrong.
 * Checks that depend on an earlier one (token validity needs a reachable daemon) are skipped.
 */
export async function runDoctor(input: DoctorInput): Promise<CheckResult[]> {
  const { context, client } = input;
  const checks: CheckResult[] = [configCheck(context), await filesCheck(context)];
  const token = await tokenCheck(input);
  checks.push(token.check);
  // With the environment unreadable, the daemon address is only the default, not the one the
  // operator set: probing it would report on some other daemon, or none.
  if (context.config instanceof ConfigError && !input.globals.daemon) {
    const why = "the configuration is invalid (or pass --daemon)";
    for (const name of ["daemon", "store", "token valid", "clock"]) checks.push(skipped(name, why));
    return checks;
  }
  const daemon = await daemonChecks(client, context);
  checks.push(...daemon.checks);
  if (!daemon.reachable) {
    checks.push(skipped("token valid", "daemon not reachable"));
  } else if (!token.value) {
    checks.push(skipped("token valid", "no token to try"));
  } else {
    checks.push(await tokenValidityCheck(context, token.value, token.source));
  }
  checks.push(clockCheck(daemon.reachable ? client.lastServerDate() : undefined, daemon.reachable));
  return checks;
}

/**
 * The whole environment, as daemon and gateway read it, not only the CLI's variables. A variable
 * consentctl reads (CLI_VARIABLES) that does not parse fails the check; one only the service reads
 * (CONSENT_DRAIN_TIMEOUT_MS, CONSENT_HTTP_PORT…) is a warning: consentctl works, and a service
 * started from this shell would refuse to start.
 */
function configCheck(context: CommandContext): CheckResult {
  const hint =
    "fix or unset the variable; the README's configuration table lists each one and its default";
  if (context.config instanceof ConfigError) {
    return { name: "config", status: "fail", detail: context.config.message, hint };
  }
  const config = tryLoadConfig(context.env);
  if (config instanceof ConfigError) {
    return {
      name: "config",
      status: "warn",
      detail: `${config.message}: a setting of the daemon and gateway, which consentctl does not read; a service started from this shell would refuse to start`,
      hint,
    };
  }
  return {
    name: "config",
    status: "pass",
    // This shell's view: a daemon started elsewhere may have been given other values.
    detail: `this shell's CONSENT_* variables are valid (a service started from it would use data dir ${config.dataDir} and base URL ${config.baseUrl}; a daemon started elsewhere has its own)`,
  };
}

/**
 * The data directory on this machine, when there is one: its secrets and store files must be the
 * owner's alone (the service warns at start-up, and never changes a mode itself).
 */
async function filesCheck(context: CommandContext): Promise<CheckResult> {
  const name = "data files";
  if (context.config instanceof ConfigError) return skipped(name, "the configuration is invalid");
  const exists = await stat(context.dataDir).then(
    (info) => info.isDirectory(),
    () => false,
  );
  if (!exists) {
    return skipped(name, `no data directory at ${context.dataDir} on this machine`);
  }
  const exposed = await exposedFiles(context.dataDir);
  if (!exposed) {
    return {
      name,
      status: "pass",
      detail: `the secrets and store files in ${context.dataDir} are the owner's alone`,
    };
  }
  return {
    name,
    status: "fail",
    detail: exposed,
    hint: "chmod 600 those files and 700 their directories: they hold the operator token, the identity key, webhook signing secrets and key digests",
  };
}

async function tokenCheck(input: DoctorInput) {
  if (input.context.config instanceof ConfigError && !input.globals.token) {
    return {
      check: skipped("token", "the configuration is invalid"),
      value: undefined,
      source: undefined,
    };
  }
  try {
    const found = await findOperatorToken(input.globals, input.context);
    if (found) {
      // A token the daemon would refuse to start with is no daemon's token (bootstrap.ts).
      const problem = operatorTokenProblem(found.token);
      const check: CheckResult = problem
        ? {
            name: "token",
            status: "fail",
            detail: `the token in ${found.source} ${problem}`,
            hint: "no daemon starts with such a token: use the one the daemon made (<data dir>/admin-token on its machine), or pass --token",
          }
        : { name: "token", status: "pass", detail: `found (${found.source})` };
      return { check, value: found.token, source: found.source };
    }
    const check: CheckResult = {
      name: "token",
      status: "fail",
      detail: "no operator token found",
      hint: "pass --token, set CONSENT_ADMIN_TOKEN, or set CONSENT_DATA_DIR to the daemon's data directory",
    };
    return { check, value: undefined, source: undefined };
  } catch (error) {
    const problem = describeProblem(error, { daemonUrl: input.context.daemonUrl });
    const check: CheckResult = {
      name: "token",
      status: "fail",
      detail: problem.message,
      hint: problem.hint,
    };
    return { check, value: undefined, source: undefined };
  }
}

async function daemonChecks(client: DaemonClient, context: CommandContext) {
  try {
    const report = await checkHealth(client);
    const checks: CheckResult[] = [
      {
        name: "daemon",
        status: "pass",
        detail: `reachable at ${report.daemonUrl} (${report.latencyMs} ms)`,
      },
      storeCheck(report),
      ...(report.subjectsOk === false
        ? [
            {
              name: "subjects",
              status: "fail" as const,
              detail: SUBJECTS_UNAVAILABLE,
              hint: SUBJECTS_UNAVAILABLE_HINT,
            },
          ]
        : []),
    ];
    return { reachable: true, checks };
  } catch (error) {
    const problem = describeProblem(error, { daemonUrl: context.daemonUrl });
    const checks: CheckResult[] = [
      { name: "daemon", status: "fail", detail: problem.message, hint: problem.hint },
      skipped("store", "daemon not reachable"),
    ];
    return { reachable: false, checks };
  }
}

function storeCheck(report: HealthReport): CheckResult {
  switch (storeVerdict(report)) {
    case "down":
      return {
        name: "store",
        status: "fail",
        detail: `the daemon reports ${report.status}`,
        hint: "check the daemon's log: its store (LMDB data dir or MONGODB_URI) does not answer, or its files are damaged",
      };
    case "refusing":
      return { name: "store", status: "fail", detail: WRITES_REFUSED, hint: WRITES_REFUSED_HINT };
    case "ok":
      return { name: "store", status: "pass", detail: "the daemon's store answers" };
  }
}

async function tokenValidityCheck(
  context: CommandContext,
  token: string,
  source: string | undefined,
): Promise<CheckResult> {
  const client = createDaemonClient({ url: context.daemonUrl, token });
  try {
    const { teams } = await client.admin.listTeams({});
    return {
      name: "token valid",
      status: "pass",
      detail: `the daemon accepts it (${teams.length} team${teams.length === 1 ? "" : "s"})`,
    };
  } catch (error) {
    const problem = describeProblem(error, { daemonUrl: context.daemonUrl, tokenSource: source });
    return { name: "token valid", status: "fail", detail: problem.message, hint: problem.hint };
  } finally {
    client.close();
  }
}

export function clockCheck(serverDate: Date | undefined, reachable: boolean): CheckResult {
  if (!serverDate) {
    return skipped("clock", reachable ? "the daemon sent no date header" : "daemon not reachable");
  }
  // The date header has whole seconds, cut down: the daemon's clock read half a second more on
  // average, so two clocks in step are not told "1 s ahead" every other run.
  const skewMs = Date.now() - (serverDate.getTime() + 500);
  const seconds = Math.round(skewMs / 1000);
  const detail =
    seconds === 0
      ? "local clock is in step with the daemon's (to the second)"
      : `local clock is ${Math.abs(seconds)} s ${seconds > 0 ? "ahead of" : "behind"} the daemon's`;
  if (Math.abs(skewMs) <= MAX_CLOCK_SKEW_MS) return { name: "clock", status: "pass", detail };
  return {
    name: "clock",
    status: "fail",
    detail,
    hint: "synchronise both machines with NTP; key expiry and rate-limit windows follow the daemon's clock",
  };
}

function skipped(name: string, why: string): CheckResult {
  return { name, status: "skip", detail: `skipped: ${why}` };
}
