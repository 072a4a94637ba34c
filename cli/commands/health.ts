import type { Command } from "commander";
import { checkHealth } from "#cli/commands/health-check.js";
import { examples } from "#cli/format.js";
import type { Runtime } from "#cli/program.js";

/** `health`: daemon and store status; exit 1 unless both are up. */
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
        call: ({ client }) => checkHealth(client),
        json: (report) => ({
          daemon: { url: report.daemonUrl, reachable: true, status: report.status },
          store: { ok: report.storeOk },
          latencyMs: report.latencyMs,
        }),
        view: async () => (await import("#cli/views/health-views.js")).healthView(),
        exitCode: (report) => (report.storeOk ? 0 : 1),
      }),
    );
}
