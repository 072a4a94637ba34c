import type { Logger } from "pino";
import { CLOCK_SKEW_MS, type Clock } from "#daemon/clock.js";
import { idMillis } from "#daemon/consent-log/consent-log-rules.js";
import type { Store } from "#daemon/store/store.js";

/**
 * Says once, at start-up, when this daemon's clock reads earlier than the newest consent log row
 * (its id, a UUIDv7, carries the millisecond it was taken at): the clock was most likely set back
 * since, or runs behind the other daemons'. Ids are safe (each daemon takes them above the
 * store's newest), but expiries, sessions, rate-limit windows and webhook retries follow the
 * clock (README, "Clock"). Within CLOCK_SKEW_MS it says nothing: daemons' clocks differ that much.
 */
export async function warnOfClockBehindStore(
  store: Store,
  clock: Clock,
  logger: Logger,
): Promise<void> {
  let newest: string | undefined;
  try {
    newest = await store.consentLog.newestId();
  } catch (err) {
    // The service already serves: a store that cannot answer now says so on its requests.
    logger.warn({ err }, "could not compare the clock with the newest consent log row");
    return;
  }
  if (newest === undefined) return;
  const now = clock();
  const newestAt = new Date(idMillis(newest));
  const behindMs = newestAt.getTime() - now.getTime();
  if (behindMs <= CLOCK_SKEW_MS) return;
  logger.warn(
    { clock: now.toISOString(), newestConsentLogRow: newestAt.toISOString(), behindMs },
    `the clock reads ${spanOf(behindMs)} earlier than the newest consent log row was written (${now.toISOString()}, the row ${newestAt.toISOString()}): it was set back since, or was ahead then. Consent log ids continue above the stored ones, but everything else follows this clock: what was stored by the later time (sessions, API keys, preference links, subject states, rate-limit windows, webhook retries) expires or falls due up to that much later. Keep the clock synchronised (NTP); README, "Clock"`,
  );
}

/** A span of time as hours, minutes and seconds ("1 h 5 min", "12 min 30 s", "8 s"). */
function spanOf(ms: number): string {
  const seconds = Math.round(ms / 1_000);
  const [h, m, s] = [Math.floor(seconds / 3_600), Math.floor(seconds / 60) % 60, seconds % 60];
  if (h > 0) return `${h} h${m > 0 ? ` ${m} min` : ""}`;
  if (m > 0) return `${m} min${s > 0 ? ` ${s} s` : ""}`;
  return `${s} s`;
}
