import { messageOf } from "#daemon/errors.js";
import { type ErrorLogger, repeatedFailureLog } from "#daemon/logging.js";

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
}

/**
 * While loaders are served stale no request fails, so the gateway's "requests are answered 503"
 * warning says nothing of it: a warning at once and then at most once per REPEATED_FAILURE_LOG_MS
 * (repeatedFailureLog) names how many banners are served as last read, with the failed or
 * unanswered reads since the previous line; the first read the daemon answers after a warning is
 * an info line, so the log shows when the outage ended.
 */
export function createStaleServingLog(logger: StaleServingLogger): StaleServingLog {
  let warned = false;
  const warn = repeatedFailureLog(
    {
      error: (details, message) => logger.error(details, message),
      warn: (details, message) => {
        warned = true;
        logger.warn(details, message);
      },
    },
    "the daemon could not be reached or has not answered: loaders are served as last read",
    { causeOf: messageOf },
  );
  return {
    servedStale: (cause, staleBanners) => warn(cause, { staleBanners }),
    answered(staleBanners) {
      if (!warned) return;
      warned = false;
      logger.info({ staleBanners }, "the daemon answers again: loaders are served as it answers");
    },
  };
}
