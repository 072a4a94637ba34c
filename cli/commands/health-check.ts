import type { DaemonClient } from "#cli/daemon-client.js";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "#gen/grpc/health/v1/health_pb.js";

/** What a health call learned: the daemon answered, and whether its store did. */
export interface HealthReport {
  daemonUrl: string;
  /** grpc.health.v1 status name: SERVING while the store answers, NOT_SERVING when it does not. */
  status: string;
  storeOk: boolean;
  latencyMs: number;
}

/**
 * Asks the daemon's standard grpc.health.v1 service about the whole server (service ""). The
 * daemon reports SERVING only while its store answers a ping, so one call covers both; `health`
 * and `doctor` share it.
 */
export async function checkHealth(client: DaemonClient): Promise<HealthReport> {
  const started = performance.now();
  const { status } = await client.health.check({ service: "" });
  return {
    daemonUrl: client.url,
    status: ServingStatus[status] ?? String(status),
    storeOk: status === ServingStatus.SERVING,
    latencyMs: Math.round(performance.now() - started),
  };
}
