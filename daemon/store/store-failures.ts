import { type ErrorLogger, repeatedFailureLog } from "#daemon/logging.js";
import { isStoreFull } from "#daemon/store/disk-guard.js";
import type { Store, StoreUnavailability } from "#daemon/store/store.js";

/**
 * Settles calls made side by side on the store (a webhook pass's fan-outs, the purge of each
 * kind of record) and fails as they did: with the one failure, or with an AggregateError of
 * all of them when several failed, so that none of their causes goes unreported
 * (storeFailureLog).
 */
export async function settleAll<T>(calls: readonly Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(calls);
  const failures = settled.flatMap((result) =>
    result.status === "rejected" ? [result.reason] : [],
  );
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) {
    throw new AggregateError(failures, `${failures.length} calls on the store failed`);
  }
  return settled.map((result) => (result as PromiseFulfilledResult<T>).value);
}

/**
 * Logs the failure of work the daemon does on the store by itself (no request to answer), at
 * the level of each of its causes (an AggregateError of settleAll has several): the store out of
 * reach for now is a warning, `unavailable`, once per REPEATED_FAILURE_LOG_MS while it lasts; a
 * full disk nothing (the disk guard has reported it); any other an error, `failed`, logged at once
 * when its words are new. A failure of another cause met beside an outage is thus still an
 * error, and the outage still the one warning a while, whichever of them came first.
 */
export function storeFailureLog(
  store: Pick<Store, "unavailability">,
  logger: ErrorLogger,
  messages: { unavailable: string; failed: string },
): (error: unknown, details?: object) => void {
  const logUnavailable = unavailableLog(logger, messages.unavailable);
  const logFailed = repeatedFailureLog(logger, messages.failed, { level: "error", byWords: true });
  return (error, details) => {
    for (const cause of causesOf(error)) {
      const outage = store.unavailability(cause);
      if (outage) logUnavailable(outage, details);
      else if (!isStoreFull(cause)) logFailed(cause, details);
    }
  };
}

/**
 * Logs an error that the store's `unavailability` takes, as a warning once per
 * REPEATED_FAILURE_LOG_MS while it lasts: `message` for the store briefly out of reach, or the
 * store's own words for one that lasts until the operator acts (the outage's `warning`: MongoDB's
 * replica set with too few data-bearing members for a majority), each kept to its own pace, so
 * that neither hides the other. The line names the error as `storeError`, the outage's `cause`
 * (MongoDB's name, code, codeName, labels and message), not with its stack: an outage is the
 * backend's state, whose stack, the same at every call, says nothing an operator acts on.
 */
export function unavailableLog(
  logger: ErrorLogger,
  message: string,
): (outage: StoreUnavailability, details?: object) => void {
  const logOf = (words: string) => repeatedFailureLog(logger, words, { fieldsOf: fieldsInLog });
  const logPassing = logOf(message);
  // One per warning the store words: a handful of fixed texts.
  const logLasting = new Map<string, (outage: StoreUnavailability, details?: object) => void>();
  return (outage, details) => {
    const { warning } = outage;
    if (warning === undefined) return logPassing(outage, details);
    let log = logLasting.get(warning);
    if (!log) {
      log = logOf(warning);
      logLasting.set(warning, log);
    }
    log(outage, details);
  };
}

/**
 * An outage's line names its error as the store accounts for it, without a stack, as
 * `storeError`: an object, where the gateway's lines give their `cause` in words (one log
 * stream in `npm start`: a field keeps one type, as log stores that map a field on first sight
 * require).
 */
function fieldsInLog(outage: StoreUnavailability): { storeError: StoreUnavailability["cause"] } {
  return { storeError: outage.cause };
}

function causesOf(error: unknown): unknown[] {
  return error instanceof AggregateError ? error.errors.flatMap(causesOf) : [error];
}
