import { ConnectError } from "@connectrpc/connect";
import type { Command } from "commander";
import { allServing, checkHealth, type HealthReport } from "#cli/commands/health-check.js";
import type { CheckResult } from "#cli/components/check-list.js";
import type { DaemonClient } from "#cli/daemon-client.js";
import { examples } from "#cli/format.js";
import { describeProblem } from "#cli/problems.js";
import type { Runtime } from "#cli/program.js";

/** What `health` learned: the daemon's report, or why it could not be asked. */
type HealthOutcome =
  | { reachable: true; report: HealthReport }
  | { reachable: false; daemonUrl: string; problem: { message: string; hint?: string } };

/**
 * Asks the daemon; a failed call is part of the report, not an error (cli/README.md: the report
 * of `health` and `doctor` still goes to stdout), described as `doctor` describes it. Anything
 * but a ConnectError is a bug in consentctl and still fails the command.
 */
async function probe(client: DaemonClient): Promise<HealthOutcome> {
  try {
    return { reachable: true, report: await checkHealth(client) };
  } catch (error) {
    if (!(error instanceof ConnectError)) throw error;
    const { message, hint } = describeProblem(error, { daemonUrl: client.url });
    return { reachable: false, daemonUrl: client.url, problem: { message, hint } };
  }
}

/** The unreachable daemon as `doctor` lists it: the daemon failed, the store was not asked. */
function unreachableChecks(problem: { message: string; hint?: string }): CheckResult[] {
  return [
    { name: "daemon", status: "fail", detail: problem.message, hint: problem.hint },
    { name: "store", status: "skip", detail: "skipped: daemon not reachable" },
  ];
}

function healthJson(outcome: HealthOutcome) {
  if (!outcome.reachable) {
    const { daemonUrl, problem } = outcome;
    return {
      // grpc.health.v1's UNKNOWN: nobody answered, so there is no serving status.
      daemon: { url: daemonUrl, reachable: false, status: "UNKNOWN", ...problem },
      // The same shape as a reachable daemon's report: nothing is known of the store.
      store: { ok: false, acceptsWrites: null },
      subjects: { ok: null },
      latencyMs: null,
    };
  }
  const { report } = outcome;
  return {
    daemon: { url: report.daemonUrl, reachable: true, status: report.status },
    store: { ok: report.storeOk, acceptsWrites: report.writesOk ?? null },
    subjects: { ok: report.subjectsOk ?? null },
    latencyMs: report.latencyMs,
  };
}

async function healthView() {
  const views = await import("#cli/views/health-views.js");
  const [showReport, showChecks] = [views.healthView(), views.checkListView()];
  return (outcome: HealthOutcome) =>
    outcome.reachable ? showReport(outcome.report) : showChecks(unreachableChecks(outcome.problem));
}

/** `health`: daemon and store status; exit 1 unless both are up and writes are accepted. */
export function registerHealthCommand(program: Command, runtime: Runtime): void {
  program
    .command("health")
    .description("check that the daemon and its store are up (grpc.health.v1; needs no token)")
    .addHelpText(
      "after",
      examples("consentctl health", "consentctl health --daemon http://10.0.0.5:50051 --json"),
    )
    .action((_options: unknown, command: Command) =>
      runtime.run(command, {
        progress: "Checking daemon health…",
        auth: "none",
        call: ({ client }) => probe(client),
        json: healthJson,
        view: healthView,
        exitCode: (outcome) => (outcome.reachable && allServing(outcome.report) ? 0 : 1),
      }),
    );
}
