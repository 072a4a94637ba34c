import type { ErrorLogger } from "#daemon/logging.js";
import { createOutageLog } from "#gateway/outage-log.js";

/** What the loader's outage lines need of a logger (the gateway's pino logger). */
export interface StaleServingLogger extends ErrorLogger {
  info(details: object, message: string): void;
}

/** The operator's view of loaders served stale (stale-if-error.ts), for one loader cache. */
export interface StaleServingLog {
  /** A banner's read failed or went unanswered, and `staleBanners` are served as last read. */
  servedStale(cause: unknown, staleBanners: number): void;
  /** The daemon answered a read; `staleBanners` are still served as last read until re-read. */
  answered(staleBanners: number): void;
  /** The gateway has closed: reads held back are told now, and nothing after (outage-log.ts). */
  close(): void;
}

/**
 * While loaders are served stale no request fails, so the gateway's "requests are answered 503"
 * warning says nothing of it: a warning at once and then at most once per REPEATED_FAILURE_LOG_MS
 * (outage-log.ts) names how many banners are served as last read, with the failed or unanswered
 * reads it held back; the first read the daemon answers after a warning is an info line, so the
 * log shows when the outage ended, counting the reads failed since the warning. An outage within
 * 10 s of a warning is told when those 10 s are over: a warning if reads still fail, else an info
 * line counting its failed reads.
 */
export function createStaleServingLog(
  logger: StaleServingLogger,
  intervalMs?: number,
): StaleServingLog {
  let staleBanners = 0;
  const outages = createOutageLog(
    {
      out: ({ failures, cause }) =>
        logger.warn(
          { cause, staleBanners, failedSincePreviousLine: failures - 1 },
          "the daemon could not be reached or has not answered: loaders are served as last read",
        ),
      back: ({ failures, cause }) =>
        logger.info(
          { staleBanners, failedSincePreviousLine: failures, ...(cause && { cause }) },
          "the daemon answers again: loaders are served as it answers",
        ),
    },
    intervalMs,
  );
  return {
    servedStale(cause, stale) {
      staleBanners = stale;
      outages.failed(cause);
    },
    answered(stale) {
      staleBanners = stale;
      outages.answered();
    },
    close: () => outages.close(),
  };
}
