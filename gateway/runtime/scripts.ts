/**
 * Activates `<script type="text/plain" data-category="…">` once every category it names (space-
 * or comma-separated) is accepted: the element is replaced by a live copy, which the browser then
 * runs. `data-type` gives the live type (default text/javascript, e.g. "module"). The copy carries
 * the original's nonce, else the loader's, so a strict CSP still lets it run.
 */
export function activateScripts(accepted: readonly string[], nonce: string): void {
  const blocked = document.querySelectorAll<HTMLScriptElement>(
    'script[type="text/plain"][data-category]',
  );
  for (const original of Array.from(blocked)) {
    const needs = (original.dataset.category ?? "").split(/[\s,]+/).filter(Boolean);
    if (needs.length === 0 || !needs.every((name) => accepted.includes(name))) continue;
    const live = document.createElement("script");
    for (const attribute of Array.from(original.attributes)) {
      if (attribute.name !== "type") live.setAttribute(attribute.name, attribute.value);
    }
    live.type = original.dataset.type || "text/javascript";
    live.nonce = original.nonce || nonce;
    live.text = original.text;
    original.replaceWith(live);
  }
}
