import { ConnectError } from "@connectrpc/connect";
import type { DaemonClient } from "#cli/daemon-client.js";
import { STORE_WRITES_HEALTH } from "#daemon/health/health-service.js";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "#gen/grpc/health/v1/health_pb.js";

/** What a health call learned: the daemon answered, and whether its store did. */
export interface HealthReport {
  daemonUrl: string;
  /** grpc.health.v1 status name: SERVING while the store answers, NOT_SERVING when it does not. */
  status: string;
  storeOk: boolean;
  /**
   * Whether the store accepts writes (false while the disk guard refuses them, reads still
   * served); undefined from a daemon that does not report it, or did not answer the question.
   */
  writesOk: boolean | undefined;
  latencyMs: number;
}

/**
 * What a report says of the store, read one way by `health`'s exit code, its view and `doctor`
 * (each in its own words): down (not answering), refusing writes (the disk guard), or ok. A
 * daemon that does not say whether it accepts writes is ok while its store answers.
 */
export function storeVerdict(report: HealthReport): "down" | "refusing" | "ok" {
  if (!report.storeOk) return "down";
  return report.writesOk === false ? "refusing" : "ok";
}

/**
 * Asks the daemon's standard grpc.health.v1 service about the whole server (service "") and
 * about writes (STORE_WRITES_HEALTH). The daemon reports SERVING for "" only while its store
 * answers a ping, so one call covers both; `health` and `doctor` share it.
 */
export async function checkHealth(client: DaemonClient): Promise<HealthReport> {
  const started = performance.now();
  const [{ status }, writes] = await Promise.all([
    client.health.check({ service: "" }),
    client.health.check({ service: STORE_WRITES_HEALTH }).then(
      (response) => response.status,
      (error: unknown) => {
        // A daemon from before the name answers NOT_FOUND: it cannot say. Any other failure of
        // this second question leaves it unanswered; the first one tells whether the daemon is up.
        if (error instanceof ConnectError) return undefined;
        throw error;
      },
    ),
  ]);
  return {
    daemonUrl: client.url,
    status: ServingStatus[status] ?? String(status),
    storeOk: status === ServingStatus.SERVING,
    writesOk: writes === undefined ? undefined : writes === ServingStatus.SERVING,
    latencyMs: Math.round(performance.now() - started),
  };
}
