import {
  acceptedServices,
  isAdCategory,
  usOptOutChoices,
} from "../../daemon/banners/category-signals.js";
import { isoTimeMs } from "../../daemon/validation/patterns.js";
import { acceptTypeOf, all, config, defaultCategories, gpcApplies, required } from "./banner.js";
import type { RuntimeRule } from "./config.js";
import { consentDefault, consentUpdate } from "./consent-mode.js";
import { warn } from "./console-lines.js";
import { nonce, post } from "./loader-gateway.js";
import { activateScripts } from "./scripts.js";
import {
  type ConsentState,
  cookiesBlocked,
  forgetState,
  randomUuid,
  readState,
  stateProblem,
  toJson,
  writeState,
} from "./state.js";
import { resolveTexts } from "./texts.js";
import { type Choice, showBanner } from "./view.js";

// The page's consent: its state, putting it in effect, the banner's view and the integrator API.
// The banner's configuration and what follows from it are banner.ts's; the loader's tag and the
// gateway it came from, where the rows go, loader-gateway.ts's.

/** The texts for the page's language as it is now: a single-page app may change `<html lang>`. */
const textsNow = () =>
  resolveTexts(config.texts, [
    document.documentElement.lang,
    ...(navigator.languages ?? [navigator.language]),
  ]);
let texts = textsNow();
/** What the gated scripts are judged by: the loader's nonce and the banner's categories. */
const gated = { nonce, publicId: config.id, categories: all };

let state = readState(config.id);
/** The state the cookie held when this page last read or wrote it (JSON), for catchUp. */
let known = toJson(state);
let closeView: (() => void) | undefined;
/** Whether the open view asks for a first choice (not preferences the visitor re-opened). */
let prompting = false;

const explicit = (s: ConsentState | null) => (s && !s.isDefaultState ? s : null);
/** Whether the visitor's choice covers the published revision: no need to ask. */
const isCurrent = () => (explicit(state)?.revision ?? -1) >= config.revision;
const copy = (s: ConsentState | null) =>
  s ? (JSON.parse(toJson(s) as string) as ConsentState) : null;

function whenReady(run: () => void): void {
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();
}

/**
 * What a consent:change reports: a choice made on this page, a state the integrator applied, or
 * a choice taken from another tab (an integrator that stores each choice stores the first only).
 */
type ChangeSource = "choice" | "apply" | "other-tab";

function emit(type: "ready" | "change", source?: ChangeSource): void {
  window.dispatchEvent(
    new CustomEvent(`consent:${type}`, {
      detail: { consentState: copy(state), ...(source && { source }) },
    }),
  );
}

/** Closes the open view if it asks for a first choice; preferences the visitor opened stay. */
function closePrompt(): void {
  if (!prompting) return;
  closeView?.();
  closeView = undefined;
}

/**
 * The next canonical state (spec 2.4); the consentId and first-choice time carry over. The time
 * of this choice is never before the first one's (PUT state refuses that), though a device whose
 * clock ran ahead made the first, or its time (a state written through the API) has digits past
 * the millisecond Date keeps and falls in this very millisecond.
 */
function nextState(categories: string[], extra: Partial<ConsentState>): ConsentState {
  const now = new Date().toISOString();
  const first = explicit(state)?.consentTimestamp;
  const at = first !== undefined && isoTimeMs(first) >= Date.parse(now) ? first : now;
  return {
    schemaVersion: 2,
    categories,
    revision: config.revision,
    acceptType: acceptTypeOf(categories),
    consentId: state?.consentId ?? randomUuid(),
    consentTimestamp: first ?? at,
    lastConsentTimestamp: at,
    languageCode: texts.languageCode,
    // Undefined when none: toJson leaves it out of the cookie, the row and every copy.
    services: acceptedServices(config.categories, categories),
    ...(config.rule && { jurisdictions: [config.rule.id] }),
    ...(config.rule?.us && {
      usOptOutChoices: usOptOutChoices(categories),
      gpcRespected: gpcApplies,
    }),
    ...extra,
  };
}

/**
 * Tells Consent Mode and runs the gated scripts; the page's own code failing stops neither. What
 * takes effect is the banner's own categories: the required ones always (shown "Always on"), the
 * others when the state accepts them. A state applied from elsewhere that leaves a required
 * category out, or names one this banner does not have, changes neither. No state (an erasure,
 * here or in another tab) is the required ones alone, for the gated scripts the page adds from
 * then on too.
 */
function apply(s: ConsentState | null): void {
  const accepted = all.filter((name) => required.includes(name) || s?.categories.includes(name));
  consentUpdate(config.id, accepted);
  whenReady(() => activateScripts(accepted, gated));
}

/**
 * A choice or a default: recorded first, so nothing the page does afterwards can lose the row;
 * consent:change fires when a source is given (not for a default).
 */
function commit(next: ConsentState, method: string, source?: ChangeSource): void {
  state = next;
  if (writeState(config.id, next)) known = toJson(next);
  else {
    warn(
      config.id,
      `the browser did not keep the consent cookie (cookies blocked for this site?), so the banner will ask again on the next page`,
    );
  }
  post(method, next);
  apply(next);
  if (source) emit("change", source);
}

/**
 * The cookie may hold a newer state than this page: a choice made in another tab, or on another
 * page while this one waited in the back/forward cache, or none after an erasure there. It is
 * adopted and put in effect before anything builds on `state`; a prompt it answers closes
 * (preferences the visitor re-opened stay open), one it calls for opens, and a change to or
 * from an explicit choice fires consent:change here too, for this page's listeners.
 */
function catchUp(): void {
  const stored = readState(config.id);
  const seen = toJson(stored);
  // Unchanged since this page looked: kept, also when this page holds a state the cookie could
  // not take (cookies blocked, one too large).
  if (seen === known) return;
  known = seen;
  const had = explicit(state);
  state = stored;
  // No state (erased there): back to the required categories; tags run stay run.
  apply(stored);
  if (isCurrent()) closePrompt();
  else if (!closeView) open(false);
  if (had || explicit(stored)) emit("change", "other-tab");
}

/** An explicit choice: the first one by its button, any later one as consent_changed. */
function choose(choice: Choice, selected: string[]): void {
  // The consentId and the first choice's time carry over from a choice made in another tab.
  catchUp();
  const categories =
    choice === "accept"
      ? all
      : choice === "reject"
        ? required
        : all.filter((n) => selected.includes(n) || required.includes(n));
  const first = { accept: "accept_all", reject: "accept_necessary", save: "consent_given" }[choice];
  commit(
    nextState(categories, { collectedVia: "banner", acceptType: acceptTypeOf(categories, choice) }),
    explicit(state) ? "consent_changed" : first,
    "choice",
  );
}

/**
 * 11 CCR §7025(c)(3): Global Privacy Control opts out of sale and sharing under a US rule even
 * after an earlier opt-in; only a choice made while it was on (gpcRespected) stands. A stored
 * choice that accepts an advertising category otherwise loses them, recorded as a
 * consent_changed row at its own revision. Whether it did; the caller announces the change.
 */
function gpcOptOut(): boolean {
  const stored = explicit(state);
  if (!gpcApplies || !stored || stored.gpcRespected || !stored.categories.some(isAdCategory)) {
    return false;
  }
  commit(
    nextState(
      stored.categories.filter((name) => !isAdCategory(name)),
      { revision: stored.revision, collectedVia: stored.collectedVia },
    ),
    "consent_changed",
  );
  return true;
}

/** A jurisdiction default (spec 3.3): a consent_default row, never a visitor's choice. */
function defaultState(rule: RuntimeRule): ConsentState {
  const categories = defaultCategories(rule);
  return nextState(categories, {
    isDefaultState: true,
    collectedVia: `default_${rule.mode.replace("_", "")}` as ConsentState["collectedVia"],
    ...(rule.mode === "opt_in" && { isPending: true }),
  });
}

/** Whether two lists of category names hold the same names. */
const sameNames = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((name) => b.includes(name));

function open(customize: boolean): void {
  whenReady(() => {
    catchUp();
    texts = textsNow();
    // A state applied before the page was ready (applyState in <head>) may have made the
    // prompt needless; re-opened preferences always show.
    if (!customize && isCurrent()) return;
    closeView?.();
    prompting = !customize;
    closeView = showBanner({
      config,
      texts,
      nonce: nonce ?? "",
      accepted: state?.categories ?? [],
      customize,
      dismissible: !!explicit(state) && (state?.revision ?? 0) >= config.revision,
      onChoice: choose,
      // Closed by Escape too: a later erasure in another tab (catchUp) then asks again.
      onClose: () => {
        closeView = undefined;
      },
    });
  });
}

/**
 * One banner per page (docs/banner-runtime.md): the page's consent state, its `window.consentBanner`
 * API and its modal are one each. A loader that finds a banner already running (the tag pasted
 * twice, or another banner's) warns and starts nothing. Only an API this runtime made counts: an
 * element with id "consentBanner" or an integrator's placeholder object is replaced.
 */
const RUNTIME: unique symbol = Symbol.for("consent-banner.runtime");
/** The public ID of the banner already running on the page, if one is. */
function runningBanner(): string | undefined {
  try {
    return (window as unknown as { consentBanner?: { [RUNTIME]?: string } }).consentBanner?.[
      RUNTIME
    ];
  } catch {
    // A cross-origin frame named "consentBanner" refuses to be read: not a banner.
    return undefined;
  }
}
const running = runningBanner();
if (running) {
  warn(
    config.id,
    `banner ${running} already runs on this page; one banner per page, so this loader starts nothing`,
  );
} else {
  /** The integrator API (docs/banner-runtime.md), in place before consent:ready can fire. */
  (window as unknown as { consentBanner: unknown }).consentBanner = {
    [RUNTIME]: config.id,
    /** The public ID of the banner this API belongs to. */
    bannerId: config.id,
    getState: () => copy(state),
    /** Cross-device: a state resolved by the integrator's backend, applied without a new row. */
    applyState(value: unknown): boolean {
      const refuse = (why: string) => {
        warn(config.id, `applyState refused the state: ${why}`);
        return false;
      };
      // Read once, as JSON: accessors of the integrator's object are not read again between the
      // check and the cookie, so what is judged whole is what is kept.
      let next: ConsentState;
      try {
        next = JSON.parse(toJson(value) ?? "null");
      } catch {
        return refuse("it cannot be read as JSON");
      }
      const problem = stateProblem(next);
      if (problem !== undefined) return refuse(problem);
      // A revision this banner has not published would keep it from asking after the next ones.
      if (next.revision > config.revision) {
        return refuse(`its revision is above the banner's published one, ${config.revision}`);
      }
      if (writeState(config.id, next)) known = toJson(next);
      else {
        // A state the cookie cannot hold would be forgotten at the next page: refused whole.
        // Where the browser keeps no cookie at all, every state is forgotten so: the integrator
        // hands it in on each page, and it holds for this one.
        if (!cookiesBlocked()) return refuse("it is larger than a cookie holds");
        warn(
          config.id,
          `the browser keeps no cookies for this page, so the applied state holds for this page only`,
        );
      }
      // Already a copy of the integrator's object, read once above: kept as it is.
      state = next;
      apply(next);
      if (isCurrent()) closePrompt();
      emit("change", "apply");
      // A state made where the signal was off (another device) meets it here: opted out now,
      // as on a load, and announced as a choice the integrator stores for the other devices.
      if (gpcOptOut()) emit("change", "choice");
      return true;
    },
    /**
     * Erasure (the integrator deleted the subject): this device forgets its state, cookie and
     * consentId included, and asks again; no row. Tags already run stay run until the next page.
     */
    clearState(): void {
      const had = state !== null;
      forgetState(config.id);
      known = "null";
      state = null;
      // As on a first visit: the rule's default (a consent_default row, a new consentId), else
      // only the required categories; then the banner asks.
      if (config.rule) commit(defaultState(config.rule), "consent_default");
      else apply(null);
      if (had) emit("change", "apply");
      open(false);
    },
    showPreferences: () => open(true),
  };

  // Back from the back/forward cache, or shown or focused again after a choice in another tab
  // (two windows side by side fire no visibilitychange).
  addEventListener("pageshow", (event) => event.persisted && catchUp());
  addEventListener("focus", catchUp);
  document.addEventListener(
    "visibilitychange",
    () => document.visibilityState === "visible" && catchUp(),
  );

  consentDefault(config.id);
  if (gpcOptOut()) {
    // Announced for listeners added after the loader, once the page is ready; the banner asks
    // only where the stored choice's revision would anyway.
    whenReady(() => emit("change", "choice"));
    open(false);
  } else if (state && isCurrent()) {
    apply(state);
  } else {
    // A stored default is put in effect only where it is this page's: written at the published
    // revision under the rule the visitor has now, granting what that rule grants now. One
    // written under another region's rule, or before GPC was turned on (or off), is not: the
    // rule's own default is written in its place (same consentId), and without a rule the
    // visitor has no default, as on a first visit (the cookie keeps it for a visit from there).
    const rule = config.rule;
    const defaultHere =
      !!rule &&
      !!state?.isDefaultState &&
      state.revision >= config.revision &&
      state.jurisdictions?.length === 1 &&
      state.jurisdictions[0] === rule.id &&
      sameNames(state.categories, defaultCategories(rule));
    if (!rule && state?.isDefaultState) state = null;
    if (rule && !explicit(state) && !defaultHere) commit(defaultState(rule), "consent_default");
    else if (state) apply(state);
    // No choice yet: the required categories are on all the same (shown "Always on"), so their
    // tags run now, as Consent Mode's default grants their storage.
    else whenReady(() => activateScripts(required, gated));
    open(false);
  }
  whenReady(() => emit("ready"));
}
