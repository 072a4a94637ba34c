import { isoTimeMs } from "../../daemon/validation/patterns.js";
import { all, config, gpc } from "./banner.js";
import { warn } from "./console-lines.js";
import { type ConsentState, toJson } from "./state.js";

// The loader's own tag and the gateway it came from, read as the bundle starts (the page's later
// scripts would be named otherwise), and the consent log rows posted back to that gateway.
const loaderPath = `/loader/${config.id}.js`;
/** Whether an address is the loader's: its path names this banner's loader (not its query). */
const isLoader = (address: string | undefined) => {
  try {
    return !!address && new URL(address).pathname.endsWith(loaderPath);
  } catch {
    return false;
  }
};
// The running script's element, only while it runs: the loader's tag, or the inline script a tag
// manager ran the fetched loader as. A module, or a script in a shadow root, has none. Read as the
// bundle starts, as this module is evaluated: afterwards the page's scripts would be named.
const script = document.currentScript as HTMLScriptElement | null;
/**
 * The nonce the loader ran with, or undefined where it cannot be known (no element): never read
 * off another element, which markup injected into the page could have put first.
 */
export const nonce = script ? script.nonce : undefined;
// The loader's address: its tag's; else the running code's own, as the stack names it (a module,
// a shadow root); else the latest fetch of it (a tag manager that fetched it and ran its text).
// Markup cannot make a fetch, where an injected <img> could make a request for such a path.
const loaderSrc = [
  script?.src,
  ...(new Error().stack?.match(/https?:\/\/[^\s)]+/g) ?? []).map((at) =>
    at.replace(/(:\d+){1,2}$/, ""),
  ),
  ...performance
    .getEntriesByType("resource")
    .filter((entry) =>
      /^(fetch|xmlhttprequest)$/.test((entry as PerformanceResourceTiming).initiatorType),
    )
    .map((entry) => entry.name)
    .reverse(),
].find(isLoader);
if (!loaderSrc) {
  warn(
    config.id,
    `cannot tell where the loader came from, so choices cannot be recorded; embed it with <script src>`,
  );
}
const loaderUrl = new URL(loaderSrc || location.href);
/** The gateway the loader came from (any path prefix kept): the log route lives beside it. */
const apiBase = loaderUrl.origin + loaderUrl.pathname.replace(/\/loader\/[^/]*$/, "");

/**
 * The browser's own means of posting a row, taken as the loader runs (first in `<head>`): a page
 * script that later replaces `navigator.sendBeacon` or `window.fetch` (a wrapper that drops what
 * it does not know, one that throws) does not reach the row.
 */
const beacon = navigator.sendBeacon?.bind(navigator);
const request = window.fetch?.bind(window);

/**
 * Posts a choice's consent log row to the gateway the loader came from, with sendBeacon
 * (text/plain: no preflight), else fetch with keepalive. It never throws: whatever the page made
 * of either, the choice is kept and applied all the same.
 */
export function post(method: string, s: ConsentState): void {
  const body = toJson({
    bannerId: config.id,
    method,
    // The row says when the choice was made here, even where the state's time was held at a
    // first choice from a device whose clock ran ahead (nextState, main.ts).
    timestamp:
      isoTimeMs(s.lastConsentTimestamp) > Date.now()
        ? new Date().toISOString()
        : s.lastConsentTimestamp,
    consentId: s.consentId,
    revision: s.revision,
    languageCode: s.languageCode,
    preferences: Object.fromEntries(all.map((name) => [name, s.categories.includes(name)])),
    services: s.services,
    gpc,
    purposeChoices: s.usOptOutChoices,
    // Only what a row may keep (decisions §5: never the query or fragment), so a long query
    // neither travels nor costs the choice.
    pageUrl: location.origin + location.pathname,
    country: config.country,
    region: config.region,
    matchedRuleId: config.rule?.id,
  }) as string;
  const url = `${apiBase}/api/consent/log`;
  let queued = false;
  try {
    queued = !!beacon?.(url, body);
  } catch {
    // No beacon support (or refused): the fetch below carries the row instead.
  }
  try {
    if (!queued) {
      Promise.resolve(
        request?.(url, { method: "POST", body, keepalive: true, credentials: "omit" }),
      ).catch(() => {});
    }
  } catch {
    // Neither can post (a page that replaced both before the loader ran): the row is lost, the
    // choice is still kept and applied.
  }
}
