/**
 * Gated scripts already handed to the queue, so a later choice never runs one twice, or left out
 * for want of the nonce, so each is warned of once.
 */
const claimed = new WeakSet<HTMLScriptElement>();
/** Activations run one after another, in document order (see activateScripts). */
let queue: Promise<void> = Promise.resolve();
/** The categories of the latest state, for gated scripts the page adds later. */
let current: readonly string[] = [];
let watching: MutationObserver | undefined;

/**
 * Activates `<script type="text/plain" data-category="…">` once every category it names (space-
 * or comma-separated) is accepted: the element is replaced by a live copy, which the browser then
 * runs. `data-type` gives the live type (default text/javascript, e.g. "module"). Where the loader
 * has a nonce (`nonce`, empty without), only a gated script with that same nonce is activated; the
 * copy carries the original's nonce.
 *
 * They run in document order, as the page wrote them: an external script is waited for (loaded
 * or failed) before the next one is inserted, since an inline one inserted meanwhile would run
 * first; one marked `async` is not, as the parser would not wait for it either. One that fails
 * to activate is reported on the console and skipped; the others still run.
 * Gated scripts the page adds afterwards (a single-page app, a tag manager) are activated as they
 * arrive, by the latest state's categories.
 */
export function activateScripts(accepted: readonly string[], nonce: string): void {
  current = accepted;
  if (!watching) {
    watching = new MutationObserver(() => activateScripts(current, nonce));
    watching.observe(document.documentElement, { childList: true, subtree: true });
  }
  const blocked = document.querySelectorAll<HTMLScriptElement>(
    'script[type="text/plain"][data-category]',
  );
  for (const original of Array.from(blocked)) {
    const needs = (original.dataset.category ?? "").split(/[\s,]+/).filter(Boolean);
    if (claimed.has(original) || needs.length === 0) continue;
    // Under a nonce-based CSP, markup injected into the page cannot carry the nonce: were it
    // activated, our trusted element would run it (under 'strict-dynamic', even without one).
    if (nonce && original.nonce !== nonce) {
      claimed.add(original);
      console.warn(
        `consent banner: a script gated on "${original.dataset.category}" was not run: it needs the page's nonce`,
      );
      continue;
    }
    if (!needs.every((name) => accepted.includes(name))) continue;
    claimed.add(original);
    queue = queue.then(() => activate(original));
  }
}

interface ScriptPolicy {
  createScript(text: string): string;
}
let policy: ScriptPolicy | null | undefined;

/**
 * Under Trusted Types (`require-trusted-types-for 'script'`) an inline script's text must come
 * through a policy. The banner's, "consent-banner", passes the page's own markup through
 * unchanged; a page that lists its allowed policies (`trusted-types …`) names it there too.
 * Null where Trusted Types are unknown or the page does not allow the name.
 */
function scriptPolicy(): ScriptPolicy | null {
  if (policy === undefined) {
    const factory = (
      window as {
        trustedTypes?: {
          createPolicy(name: string, rules: { createScript(s: string): string }): ScriptPolicy;
        };
      }
    ).trustedTypes;
    try {
      policy = factory?.createPolicy("consent-banner", { createScript: (text) => text }) ?? null;
    } catch {
      policy = null;
    }
  }
  return policy;
}

/** Replaces one gated script by its live copy; settles once the copy has run (or failed). */
function activate(original: HTMLScriptElement): Promise<void> | undefined {
  try {
    // A clone rather than a new element filled in: its src is copied by the browser, which no
    // Trusted Types check stops; an inline text is set again through the policy when there is one.
    const live = original.cloneNode(true) as HTMLScriptElement;
    live.type = original.dataset.type || "text/javascript";
    live.nonce = original.nonce;
    const trusted = !live.src && scriptPolicy();
    if (trusted) live.text = trusted.createScript(original.text);
    const ran =
      live.src && !original.hasAttribute("async")
        ? new Promise<void>((resolve) => {
            live.addEventListener("load", () => resolve());
            live.addEventListener("error", () => resolve());
          })
        : undefined;
    original.replaceWith(live);
    return ran;
  } catch (error) {
    console.error("consent banner: a gated script could not be activated", error);
    return undefined;
  }
}
