import { fail, warn } from "./console-lines.js";

// This module's state is one banner's: each loader runs its own copy of the runtime, wrapped
// around its own configuration (gateway/loader/loader-response.ts), and a page runs one banner.

/**
 * Gated scripts already handed to the queue, so a later choice never runs one twice, or left out
 * for want of the nonce, so each is warned of once.
 */
const claimed = new WeakSet<HTMLScriptElement>();
/** Activations run one after another, in the parser's order (see activateScripts). */
let queue: Promise<unknown> = Promise.resolve();
/** The categories of the latest state, for gated scripts the page adds later. */
let current: readonly string[] = [];
let watching: MutationObserver | undefined;
/** Whether the console has been told that gated scripts are not run (see activateScripts). */
let unknownNonceSaid = false;
/** Category names gated scripts give that the banner lacks, lower case: each is warned of once. */
const unknownCategoriesSaid = new Set<string>();

/** What activateScripts needs of the banner. */
export interface GatedScriptsBanner {
  /** The loader's nonce: empty without one, undefined where it cannot be known. */
  nonce: string | undefined;
  publicId: string;
  /** The banner's category names: a gated script naming another one never runs. */
  categories: readonly string[];
}

/**
 * Activates `<script type="text/plain" data-category="…">` once every category it names (space-
 * or comma-separated, in any case) is accepted: the element is replaced by a live copy, which the
 * browser then runs. `data-type` gives the live type (default text/javascript, e.g. "module").
 * One naming a category the banner does not have never runs, and the console names each such
 * name once, so a site owner finds the typo (`analytic` for `analytics`).
 * Where the loader has a nonce (`nonce`, empty without), only a gated script with that same nonce
 * is activated; the copy carries the original's nonce. Where the loader's nonce cannot be known
 * (`undefined`: it runs as a module or in a shadow root, with no element of its own), none is:
 * injected markup could not be told from the page's, and the console says so once.
 *
 * Of one call, they run in the order the parser would have run them (classic ones, then deferred
 * ones, each in document order): an external script is waited for (loaded or failed, at most
 * WAIT_MS) before the next one is inserted, since an inline one inserted meanwhile would run
 * first, and so is an inline module (see waitForModule); one marked `async` is not, as the parser
 * would not wait for it either, nor one marked `nomodule`, which never loads. One that fails to
 * activate is reported on the console and skipped; the others still run.
 * Gated scripts the page adds afterwards (a single-page app, a tag manager) are activated as they
 * arrive, by the latest state's categories.
 */
export function activateScripts(accepted: readonly string[], banner: GatedScriptsBanner): void {
  const { nonce, publicId } = banner;
  if (nonce === undefined) {
    if (!unknownNonceSaid) {
      warn(
        publicId,
        `gated scripts are not run: the loader runs without a tag of its own (a module, or in a shadow root), so the page's nonce cannot be known; embed it as a classic <script src> tag`,
      );
    }
    unknownNonceSaid = true;
    return;
  }
  current = accepted;
  if (!watching) {
    watching = new MutationObserver(() => activateScripts(current, banner));
    watching.observe(document.documentElement, { childList: true, subtree: true });
  }
  const blocked = document.querySelectorAll<HTMLScriptElement>(
    'script[type="text/plain"][data-category]',
  );
  // Category names are unique ignoring case, and matched so.
  const on = accepted.map((name) => name.toLowerCase());
  const known = banner.categories.map((name) => name.toLowerCase());
  const ready: HTMLScriptElement[] = [];
  for (const original of Array.from(blocked)) {
    const written = (original.dataset.category ?? "").split(/[\s,]+/).filter(Boolean);
    const needs = written.map((name) => name.toLowerCase());
    if (claimed.has(original) || needs.length === 0) continue;
    // Under a nonce-based CSP, markup injected into the page cannot carry the nonce: were it
    // activated, our trusted element would run it (under 'strict-dynamic', even without one).
    if (nonce && original.nonce !== nonce) {
      claimed.add(original);
      warn(
        publicId,
        `a script gated on "${original.dataset.category}" was not run: it needs the page's nonce`,
      );
      continue;
    }
    for (const name of written) {
      const unknown = name.toLowerCase();
      if (known.includes(unknown) || unknownCategoriesSaid.has(unknown)) continue;
      unknownCategoriesSaid.add(unknown);
      warn(
        publicId,
        `scripts gated on "${name}" never run: the banner has no category "${name}" (its categories: ${banner.categories.join(", ")})`,
      );
    }
    if (!needs.every((name) => on.includes(name))) continue;
    claimed.add(original);
    ready.push(original);
  }
  // The parser's order: classic scripts first, then the deferred ones (modules, external classic
  // ones marked `defer`); `async` ones keep their place, as nothing waits for them.
  const deferred = (script: HTMLScriptElement) =>
    !script.hasAttribute("async") &&
    (script.dataset.type === "module" || (!!script.src && script.defer));
  for (const original of ready.filter((script) => !deferred(script)).concat(ready.filter(deferred)))
    queue = queue.then(() => activate(original, publicId));
}

/** Both pass the page's own markup through unchanged. */
interface ScriptPolicy {
  createScript(text: string): string;
  createScriptURL(url: string): string;
}
let policy: ScriptPolicy | null | false | undefined;

/**
 * Under Trusted Types (`require-trusted-types-for 'script'`) a script's text and src must come
 * through a policy. The banner's, "consent-banner", passes the page's own markup through
 * unchanged; a page that lists its allowed policies (`trusted-types …`) names it there too.
 * Null where Trusted Types are unknown, false where the page does not allow the name.
 */
function scriptPolicy(): ScriptPolicy | null | false {
  if (policy === undefined) {
    const pass = (value: string) => value;
    try {
      policy =
        (
          window as {
            trustedTypes?: { createPolicy(name: string, rules: ScriptPolicy): ScriptPolicy };
          }
        ).trustedTypes?.createPolicy("consent-banner", {
          createScript: pass,
          createScriptURL: pass,
        }) ?? null;
    } catch {
      policy = false;
    }
  }
  return policy;
}

/** How long a gated script is waited for before the ones after it go ahead. */
const WAIT_MS = 5_000;
/** An empty script: the marker that tells when an inline module has run (waitForModule). */
const EMPTY_SCRIPT = "data:text/javascript,";
/**
 * Whether a marker went past WAIT_MS: the browser's in-order list is held up behind it, so the
 * inline modules after it are not put in that list (nor waited for) until it has run.
 */
let listHeld = false;

/**
 * Settles once `script` has run or failed (its load or error event), or after WAIT_MS with a
 * console warning of the banner `publicId` naming `what`; true when it was in time.
 */
function settled(script: HTMLScriptElement, what: string, publicId: string): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      warn(
        publicId,
        `${what} neither ran nor failed within 5 s: the gated scripts after it go ahead`,
      );
      resolve(false);
    }, WAIT_MS);
    const done = () => {
      clearTimeout(timer);
      resolve(true);
    };
    script.addEventListener("load", done);
    script.addEventListener("error", done);
  });
}

/**
 * An inline module runs later than it is inserted (after its imports) and fires no event when it
 * has (HTML's "execute the script element" fires load only at a script from a file, as Chromium
 * does; whatwg/html#6421). So `module`, inserted with `async` off, is followed by an empty
 * external script with `async` off too: HTML runs such scripts, modules included, in the order
 * they were inserted (its "list of scripts that will execute in order as soon as possible"), so
 * the marker's load comes once the module has run or failed; so does its error where a CSP
 * refuses data: URLs, since a refused script takes its turn in that list all the same.
 */
function waitForModule(
  module: HTMLScriptElement,
  trusted: ScriptPolicy | null | false,
  category: string | undefined,
  publicId: string,
): Promise<unknown> {
  const marker = document.createElement("script");
  marker.async = false;
  marker.nonce = module.nonce;
  marker.src = trusted ? trusted.createScriptURL(EMPTY_SCRIPT) : EMPTY_SCRIPT;
  const ran = () => {
    listHeld = false;
    marker.remove();
  };
  marker.addEventListener("load", ran);
  marker.addEventListener("error", ran);
  const inTime = settled(marker, `an inline module gated on "${category}"`, publicId);
  module.after(marker);
  return inTime.then((yes) => {
    listHeld ||= !yes;
  });
}

/**
 * Replaces one gated script of the banner `publicId` by its live copy; settles once the copy has
 * run (or failed, or WAIT_MS have passed).
 */
function activate(original: HTMLScriptElement, publicId: string): Promise<unknown> | undefined {
  // Taken out of the page before its turn (a single-page app moved on): nothing to run or wait for.
  if (!original.isConnected) return undefined;
  try {
    const trusted = scriptPolicy();
    let live: HTMLScriptElement;
    if (trusted === false) {
      // The page refuses the policy: a clone sets no sink, so an external script still runs (an
      // inline one is refused, as is any the page added with innerHTML: see below).
      live = original.cloneNode(true) as HTMLScriptElement;
    } else {
      // A new element, not a clone: HTML fragment parsing (innerHTML, insertAdjacentHTML) marks
      // a script "already started", which a clone keeps, and such a copy never runs.
      live = document.createElement("script");
      for (const { name, value } of Array.from(original.attributes)) {
        const handler = trusted && /^on/.test(name);
        if (!/^(type|src|nonce)$/.test(name))
          live.setAttribute(name, handler ? trusted.createScript(value) : value);
      }
      if (original.src) live.src = trusted ? trusted.createScriptURL(original.src) : original.src;
      else live.text = trusted ? trusted.createScript(original.text) : original.text;
    }
    live.type = original.dataset.type || "text/javascript";
    live.nonce = original.nonce;
    const waited = !original.hasAttribute("async") && !original.noModule;
    // Where Trusted Types refuse the policy, an inline copy does not run: nothing to wait for.
    const inlineModule =
      waited && !original.src && live.type === "module" && trusted !== false && !listHeld;
    if (inlineModule) live.async = false;
    const ran = waited && original.src ? settled(live, original.src, publicId) : undefined;
    original.replaceWith(live);
    return inlineModule ? waitForModule(live, trusted, original.dataset.category, publicId) : ran;
  } catch (error) {
    fail(publicId, "a gated script could not be activated", error);
    return undefined;
  }
}
