import type { FastifyInstance } from "fastify";
import { messageOf } from "#daemon/errors.js";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendData } from "#gateway/envelope.js";
import { failureOf, isDaemonUnavailable } from "#gateway/errors.js";
import { tokenWatchOf } from "#gateway/token-watch.js";
import { routePath } from "#gateway/v1/methods.js";
import { HealthCheckResponse_ServingStatus as Status } from "#gen/grpc/health/v1/health_pb.js";

/** A health answer slower than this counts as unavailable. */
const HEALTH_TIMEOUT_MS = 2_000;

/** spec 4.1, decisions §6: 200 "ok" while the daemon and its store answer, else 503 "unavailable". */
export function healthRoutes(app: FastifyInstance, clients: DaemonClients): void {
  routePath(app, "/health", "none", {
    async GET(request, reply) {
      let serving = false;
      try {
        const { status } = await clients.health.check(
          { service: "" },
          { timeoutMs: HEALTH_TIMEOUT_MS },
        );
        // A daemon that refuses this gateway's token serves nobody through it.
        const watch = tokenWatchOf(request.server.server);
        watch?.checkIfQuiet();
        serving = status === Status.SERVING && !watch?.refused;
      } catch (err) {
        // Reported as unavailable and logged for the operator as any request's failure is: a
        // daemon out of reach, or one up whose store has stalled past the deadline, is told with
        // the outage (unreachable-log.ts), at once and then at most every 10 s, counted, since
        // a load balancer probing every second would otherwise flood the log while it lasts.
        if (isDaemonUnavailable(err)) failureOf(request, err);
        // Any other failure (no outage: a daemon of another version, a proxy's refusal) in
        // words, without a stack: the answer says unavailable, the cause says why.
        else request.log.warn({ cause: messageOf(err) }, "health check failed");
      }
      return sendData(reply, serving ? 200 : 503, { status: serving ? "ok" : "unavailable" });
    },
  });
}
