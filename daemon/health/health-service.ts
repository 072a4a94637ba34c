import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { kPeerAddress } from "#daemon/auth/caller.js";
import { clipped } from "#daemon/errors.js";
import { InFlightCounts } from "#daemon/limits/in-flight-counts.js";
import { clientOfIp } from "#daemon/limits/rate-limiter.js";
import type { Store } from "#daemon/store/store.js";
import {
  type Health,
  HealthCheckResponse_ServingStatus as Status,
} from "#gen/grpc/health/v1/health_pb.js";

/** How often Watch re-checks the store. */
const WATCH_INTERVAL_MS = 5_000;
/**
 * Watch needs no credential and runs until its caller leaves, so how many run at once is bounded:
 * per client address (a load balancer watches a few names) and in all. One more is refused with
 * RESOURCE_EXHAUSTED; Check is not bounded this way.
 */
export const MAX_WATCHES_PER_CLIENT = 16;
export const MAX_WATCHES = 256;

/**
 * The health name that reports whether the store accepts writes: NOT_SERVING while the embedded
 * store's disk guard refuses them (CONSENT_MIN_FREE_MB), though reads, and so "", are served.
 */
export const STORE_WRITES_HEALTH = "consent.store.writes";

/**
 * The standard grpc.health.v1 service. The daemon serves only while its store answers; "" names
 * the whole server, each consent.v1 service can be asked for by its full name, and
 * STORE_WRITES_HEALTH reports whether writes are accepted too. `unavailable` names a service
 * that cannot serve whatever the store says (SubjectService without an identity key: every call
 * of it answers 503 identity_unavailable), so the service's own name reports NOT_SERVING.
 */
export function createHealthService(
  store: Store,
  serviceNames: readonly string[],
  unavailable: (service: string) => boolean = () => false,
): ServiceImpl<typeof Health> {
  const known = new Set(["", STORE_WRITES_HEALTH, ...serviceNames]);

  /** A name's status, given whether the store answered. */
  function statusOf(service: string, answered: boolean): Status {
    if (!answered || unavailable(service)) return Status.NOT_SERVING;
    if (service === STORE_WRITES_HEALTH && !store.acceptsWrites()) return Status.NOT_SERVING;
    return Status.SERVING;
  }

  async function storeAnswers(): Promise<boolean> {
    try {
      await store.ping();
      return true;
    } catch {
      // An unreachable store is exactly what NOT_SERVING reports; the ping error itself is noise.
      return false;
    }
  }

  /**
   * Watches share one ping per moment: each re-checks every WATCH_INTERVAL_MS, and many at once
   * (up to MAX_WATCHES) would otherwise each ping the store.
   */
  let shared: { at: number; answers: Promise<boolean> } | undefined;
  function sharedAnswers(): Promise<boolean> {
    const now = performance.now();
    if (!shared || now - shared.at >= 1_000) shared = { at: now, answers: storeAnswers() };
    return shared.answers;
  }

  /** Watches open, in all and by client. */
  let watches = 0;
  const watchesByClient = new InFlightCounts();

  return {
    async check(request) {
      if (!known.has(request.service))
        throw new ConnectError(`unknown service ${clipped(request.service)}`, Code.NotFound);
      return { status: statusOf(request.service, await storeAnswers()) };
    },

    async *watch(request, ctx) {
      const client = clientOfIp(ctx.values.get(kPeerAddress) ?? "unknown");
      const own = watchesByClient.of(client);
      if (own >= MAX_WATCHES_PER_CLIENT || watches >= MAX_WATCHES) {
        throw new ConnectError(
          own >= MAX_WATCHES_PER_CLIENT
            ? `${MAX_WATCHES_PER_CLIENT} Watch calls are open from this address already; end one, or use Check`
            : `${MAX_WATCHES} Watch calls are open already; retry later, or use Check`,
          Code.ResourceExhausted,
        );
      }
      watches += 1;
      watchesByClient.enter(client);
      // Given back when the call ends, however it ends (connect-es returns the generator when
      // the caller leaves, and the abort wakes its wait); a watch whose caller stopped reading
      // holds its place until the connection goes.
      try {
        // grpc.health.v1: an unknown service is reported, and the call stays open (a service
        // the daemon does not serve never becomes known, so nothing follows).
        if (!known.has(request.service)) {
          yield { status: Status.SERVICE_UNKNOWN };
          if (!ctx.signal.aborted) await once(ctx.signal, "abort");
          ctx.signal.throwIfAborted();
        }
        let last: Status | undefined;
        while (!ctx.signal.aborted) {
          const current = statusOf(request.service, await sharedAnswers());
          if (current !== last) yield { status: current };
          last = current;
          await sleep(WATCH_INTERVAL_MS, undefined, { signal: ctx.signal }).catch(() => {});
        }
        // A deadline, the daemon shutting down or the caller leaving: the call ends with that
        // reason (DEADLINE_EXCEEDED, UNAVAILABLE), never as if it had finished.
        ctx.signal.throwIfAborted();
      } finally {
        watches -= 1;
        watchesByClient.leave(client);
      }
    },
  };
}
