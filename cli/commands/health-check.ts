import { ConnectError } from "@connectrpc/connect";
import type { DaemonClient } from "#cli/daemon-client.js";
import { STORE_WRITES_HEALTH } from "#daemon/health/health-service.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
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
  /**
   * Whether the subject endpoints can serve: false while the daemon has no identity key to hash
   * subject ids with (each answers 503 identity_unavailable); undefined when not answered.
   */
  subjectsOk: boolean | undefined;
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

/** Whether everything the report covers serves: the store, its writes and the subject endpoints. */
export function allServing(report: HealthReport): boolean {
  return storeVerdict(report) === "ok" && report.subjectsOk !== false;
}

/**
 * What `health` and `doctor` say of subject endpoints that cannot serve; the hint is also what a
 * subject call refused with identity_unavailable is told (problems.ts).
 */
export const SUBJECTS_UNAVAILABLE =
  "the subject endpoints answer 503 identity_unavailable: the daemon has no identity key";
export const SUBJECTS_UNAVAILABLE_HINT =
  'see the daemon\'s log: restore <data dir>/identity-key from a backup, or set CONSENT_IDENTITY_KEY to the key the records were hashed with (README, "Privacy"), then restart the daemon';

/**
 * Asks the daemon's standard grpc.health.v1 service about the whole server (service ""), about
 * writes (STORE_WRITES_HEALTH) and about the subject endpoints (SubjectService). The daemon
 * reports SERVING for "" only while its store answers a ping, so one call covers both; `health`
 * and `doctor` share it.
 */
export async function checkHealth(client: DaemonClient): Promise<HealthReport> {
  const started = performance.now();
  const [{ status }, writes, subjects] = await Promise.all([
    client.health.check({ service: "" }),
    servingOf(client, STORE_WRITES_HEALTH),
    servingOf(client, SubjectService.typeName),
  ]);
  return {
    daemonUrl: client.url,
    status: ServingStatus[status] ?? String(status),
    storeOk: status === ServingStatus.SERVING,
    writesOk: writes,
    // Every name is NOT_SERVING while the store does not answer: only then is it the key's doing.
    subjectsOk: status === ServingStatus.SERVING ? subjects : undefined,
    latencyMs: Math.round(performance.now() - started),
  };
}

/**
 * Whether the daemon serves one name; undefined when it cannot say (a daemon from before the name
 * answers NOT_FOUND) or the question failed: the call for "" tells whether the daemon is up.
 */
function servingOf(client: DaemonClient, service: string): Promise<boolean | undefined> {
  return client.health.check({ service }).then(
    (response) => response.status === ServingStatus.SERVING,
    (error: unknown) => {
      if (error instanceof ConnectError) return undefined;
      throw error;
    },
  );
}
