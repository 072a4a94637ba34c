import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Store } from "#daemon/store/store.js";
import {
  type Health,
  HealthCheckResponse_ServingStatus as Status,
} from "#gen/grpc/health/v1/health_pb.js";

/** How often Watch re-checks the store. */
const WATCH_INTERVAL_MS = 5_000;

/**
 * The health name that reports whether the store accepts writes: NOT_SERVING while the embedded
 * store's disk guard refuses them (CONSENT_MIN_FREE_MB), though reads, and so "", are served.
 */
export const STORE_WRITES_HEALTH = "consent.store.writes";

/**
 * The standard grpc.health.v1 service. The daemon serves only while its store answers; "" names
 * the whole server, each consent.v1 service can be asked for by its full name, and
 * STORE_WRITES_HEALTH reports whether writes are accepted too.
 */
export function createHealthService(
  store: Store,
  serviceNames: readonly string[],
): ServiceImpl<typeof Health> {
  const known = new Set(["", STORE_WRITES_HEALTH, ...serviceNames]);

  async function status(service: string): Promise<Status> {
    try {
      await store.ping();
    } catch {
      // An unreachable store is exactly what NOT_SERVING reports; the ping error itself is noise.
      return Status.NOT_SERVING;
    }
    if (service === STORE_WRITES_HEALTH && !store.acceptsWrites()) return Status.NOT_SERVING;
    return Status.SERVING;
  }

  return {
    async check(request) {
      if (!known.has(request.service))
        throw new ConnectError(`unknown service ${request.service}`, Code.NotFound);
      return { status: await status(request.service) };
    },

    async *watch(request, ctx) {
      // grpc.health.v1: an unknown service is reported, and the call stays open (a service the
      // daemon does not serve never becomes known, so nothing follows).
      if (!known.has(request.service)) {
        yield { status: Status.SERVICE_UNKNOWN };
        if (!ctx.signal.aborted) await once(ctx.signal, "abort");
        ctx.signal.throwIfAborted();
      }
      let last: Status | undefined;
      while (!ctx.signal.aborted) {
        const current = await status(request.service);
        if (current !== last) yield { status: current };
        last = current;
        await sleep(WATCH_INTERVAL_MS, undefined, { signal: ctx.signal }).catch(() => {});
      }
      // A deadline, the daemon shutting down or the caller leaving: the call ends with that
      // reason (DEADLINE_EXCEEDED, UNAVAILABLE), never as if it had finished.
      ctx.signal.throwIfAborted();
    },
  };
}
