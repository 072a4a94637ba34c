import type { Transport } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import type { FastifyBaseLogger, FastifyRequest } from "fastify";
import { createOutageLogByCause, type OutageLog } from "#gateway/outage-log.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";

/** One gateway's log of the daemon out of its reach, and the logger of the last failed request. */
interface UnreachableLog {
  outages: OutageLog;
  failedRequestLog: FastifyBaseLogger;
}

/** Per gateway (its HTTP server, which every plugin of one app shares). */
const unreachableLogs = new WeakMap<object, UnreachableLog>();

function unreachableLogOf(
  server: object,
  serverLog: FastifyBaseLogger,
  intervalMs?: number,
): UnreachableLog {
  let log = unreachableLogs.get(server);
  if (!log) {
    const state: UnreachableLog = {
      failedRequestLog: serverLog,
      outages: createOutageLogByCause(
        {
          // The cause in words, without a stack: an outage is an expected condition, not a bug.
          out: ({ failures, cause }) =>
            state.failedRequestLog.warn(
              { cause, failedRequests: failures },
              "the daemon could not be reached or has not answered: requests are answered 503",
            ),
          back: ({ failures, cause }) =>
            serverLog.info(
              { failedRequests: failures, ...(cause && { cause }) },
              "the daemon answers again: requests are answered as it answers",
            ),
        },
        intervalMs,
      ),
    };
    log = state;
    unreachableLogs.set(server, log);
  }
  return log;
}

/**
 * Counts a request answered 503 because a call went without the daemon's answer (errors.ts,
 * isUnansweredCall: the daemon out of reach, a loader read unanswered past its bound, a deadline,
 * a proxy's 503; a loader request answered from the memory of such a failure included): a warning
 * at once for each cause in words, then at most every 10 s for it while it lasts, with how many
 * requests failed since the previous line (outage-log.ts).
 */
export function countUnreachable(request: FastifyRequest, error: unknown): void {
  const log = unreachableLogOf(request.server.server, request.server.log);
  log.failedRequestLog = request.log;
  log.outages.failed(error);
}

/**
 * Closes the unreachable log of a gateway that has closed (its HTTP server): the requests failed
 * and held back are told now, and no line comes after (outage-log.ts): the closed log stays the
 * server's, so a request cut by the close that fails later is not told by a new one.
 */
export function closeUnreachableLog(server: object): void {
  unreachableLogs.get(server)?.outages.close();
}

/**
 * `transport` telling the gateway's unreachable log (countUnreachable) when the daemon answers a
 * call, so that the end of an outage is an info line at once, counting the requests failed since
 * the last warning, rather than a warning up to 10 s later that would read as a new outage. A
 * call is watched only while an outage is being told: calls cost nothing more otherwise. Called
 * as the gateway is built, before any request: it makes the server's log, telling a lasting
 * outage every `intervalMs` (REPEATED_FAILURE_LOG_MS unless a test shortens it).
 */
export function watchingDaemonAnswers(
  transport: Transport,
  server: object,
  serverLog: FastifyBaseLogger,
  intervalMs?: number,
): Transport {
  const { outages } = unreachableLogOf(server, serverLog, intervalMs);
  return {
    // The parameters named, not spread: no array per call on every request's path.
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const answer = transport.unary(method, signal, timeoutMs, header, input, contextValues);
      if (!outages.awaitsAnswer) return answer;
      return answer.then(
        (response) => {
          outages.answered();
          return response;
        },
        (error: unknown) => {
          if (isDaemonsAnswer(error)) outages.answered();
          throw error;
        },
      );
    },
    stream: (...call) => transport.stream(...call),
  };
}

/**
 * A failure the daemon answered with: it carries the ErrorInfo the daemon gives each of its own
 * (rpc/connect-errors.ts), which no failure to reach it, no deadline and no gateway shutdown has.
 */
function isDaemonsAnswer(error: unknown): boolean {
  return error instanceof ConnectError && error.findDetails(ErrorInfoSchema).length > 0;
}
