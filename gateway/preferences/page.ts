import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ColorRoles } from "#daemon/banners/contrast.js";
import { hostOf } from "#daemon/banners/domains.js";
import { runtimeConfig } from "#gateway/loader/runtime-config.js";
import { type PageColors, pageColors } from "#gateway/preferences/page-colors.js";
import {
  type ErrorCode,
  type PageTexts,
  pageTexts,
  type RetryableSaveFailure,
} from "#gateway/preferences/page-texts.js";
import {
  categoryNotes,
  directionOf,
  languageMark,
  resolveTexts,
  type Text,
} from "#gateway/runtime/texts.js";
import type { PreferencesView } from "#gen/consent/v1/consent_log_pb.js";

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Every configured string reaches the page through this: the operator's texts are not HTML. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/**
 * One text in its element, marked with its language and direction when they are not the page's
 * (an English fallback on a page in another language: WCAG 3.1.2).
 */
function textIn(tag: string, text: Text, attributes = ""): string {
  const mark = languageMark(text);
  const lang = mark?.lang ? ` lang="${escapeHtml(mark.lang)}"` : "";
  const marked = mark ? `${lang} dir="${mark.dir}"` : "";
  return `<${tag}${attributes}${marked}>${escapeHtml(text.text)}</${tag}>`;
}

/** The page's colours as the custom properties its rules read. */
function palette(c: ColorRoles): string {
  return `--background:${c.secondary};--text:${c.text};--button:${c.primary};--accent:${c.accent}`;
}

/**
 * The colours' declarations: the light scheme, and where the page has a dark one, that one for a
 * visitor whose system prefers it (CSS only: the page runs no script), with the browser's own
 * parts (the checkboxes' boxes, the scroll bars) drawn dark too.
 */
function colorRules({ light, dark }: PageColors): string {
  if (!dark) return `:root{${palette(light)}}`;
  return `:root{color-scheme:light dark;${palette(light)}}
@media (prefers-color-scheme:dark){:root{${palette(dark)}}}`;
}

/**
 * A whole page; styles carry the response's CSP nonce, the only style the policy allows.
 * WCAG 2.2 AA as on the banner (docs/banner-runtime.md): a checkbox is 24 px square (2.5.8, target
 * size), and a word longer than the width wraps, the fieldset's included (a fieldset is at least
 * as wide as its content unless told otherwise), so at 320 CSS px (1.4.10, reflow) nothing
 * scrolls sideways.
 */
function document(lang: string, title: Text, body: string, nonce: string, c: PageColors): string {
  return `<!doctype html>
<html lang="${escapeHtml(lang)}"${directionOf(lang) === "rtl" ? ' dir="rtl"' : ""}><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
${textIn("title", title)}
<style nonce="${nonce}">
${colorRules(c)}
body{margin:0;background:var(--background);color:var(--text);font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;overflow-wrap:anywhere}
main{max-width:40rem;margin:2rem auto;padding:0 1rem}
fieldset{border:1px solid var(--text);border-radius:8px;padding:1rem;margin:0 0 1rem;min-width:0}
label{display:flex;gap:.75em;margin:0 0 .75em}
input{accent-color:var(--accent);width:24px;height:24px;margin:0;flex:none}
small{display:block}
button{font:inherit;cursor:pointer;padding:.5em 1.5em;border-radius:4px;border:2px solid var(--button);background:var(--button);color:var(--background)}
:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
a{color:inherit}
.site{margin-top:-.5em}
.status{border-left:4px solid var(--accent);padding:.5em 1em}
.status:focus{outline:none}
</style></head>
<body><main>${body}</main></body></html>
`;
}

/**
 * The preferences page (decisions §5): the banner's categories with the visitor's current choice,
 * in the language of that choice, as a plain form (no script) posted back to the same address.
 * The page's own two sentences follow the language of the operator's texts it shows; its title
 * after a save, that of its heading (titleAfterSave).
 */
export function preferencesPage(view: PreferencesView, nonce: string, saved: boolean): string {
  const banner = view.banner;
  const config = banner ? runtimeConfig(banner, null) : undefined;
  const texts = resolveTexts(config?.texts ?? {}, [view.languageCode]);
  const rows = (config?.categories ?? []).map((category, i) => {
    const text = texts.category(category);
    const checked = category.required || view.preferences[category.name] === true;
    // Named by its label (and, when locked, the note saying why), described by its description
    // and the services it covers, each where it has them, as on the banner.
    const lines = categoryNotes(text, i);
    const state = category.required
      ? " checked disabled"
      : `${checked ? " checked" : ""} name="category" value="${escapeHtml(category.name)}"`;
    const labelledBy = category.required ? `l${i} n${i}` : `l${i}`;
    const ids = lines.map(([id]) => id).join(" ");
    const describedBy = ids ? ` aria-describedby="${ids}"` : "";
    const attributes = `${state} aria-labelledby="${labelledBy}"${describedBy}`;
    const description = lines.map(([id, line]) => textIn("small", line, ` id="${id}"`)).join("");
    const note = category.required
      ? ` ${textIn("i", texts.get("alwaysOnLabel"), ` id="n${i}"`)}`
      : "";
    return `<label><input type="checkbox"${attributes}><span>${textIn("b", text.label, ` id="l${i}"`)}${note}${description}</span></label>`;
  });
  const until = view.expiresAt ? timestampDate(view.expiresAt).toISOString().slice(11, 16) : "";
  // The page's own sentences, marked English where it does not ship the texts' language.
  const { lang: ownLang, texts: own, fellBack } = pageTexts(texts.languageCode);
  const ownMark = fellBack ? { lang: ownLang } : {};
  const policy = texts.get("privacyPolicyUrl");
  // A policy taken from another language's texts is a page in that language: it says so.
  const policyAttributes = ` href="${escapeHtml(policy.text)}"${policy.lang ? ` hreflang="${escapeHtml(policy.lang)}"` : ""}`;
  // Which website these settings are for: the page is the service's, not the site's.
  const site = banner ? hostOf(banner.domain) : null;
  const heading = texts.get("title");
  const body = [
    textIn("h1", heading),
    site ? `<p class="site">${escapeHtml(site)}</p>` : "",
    // Focused on arrival, so a screen reader reads it: a live region already on the page when
    // it loads is not announced, and the page runs no script to fill one in.
    saved
      ? textIn(
          "p",
          { text: own.saved, ...ownMark },
          ' class="status" role="status" tabindex="-1" autofocus',
        )
      : "",
    textIn("p", texts.get("description")),
    `<form method="post"><fieldset>${textIn("legend", texts.get("customize"))}`,
    rows.join("\n"),
    `</fieldset>${textIn("button", texts.get("save"), ' type="submit"')}</form>`,
    `<p>${textIn("small", { text: own.validUntil(until), ...ownMark })}</p>`,
    policy.text ? `<p>${textIn("a", texts.get("privacyPolicyLabel"), policyAttributes)}</p>` : "",
  ].join("\n");
  return document(
    texts.languageCode,
    saved ? titleAfterSave(heading, texts.languageCode) : heading,
    body,
    nonce,
    pageColors(config?.colors),
  );
}

/**
 * The title right after a save: it says so too, being what a screen reader reads first and what
 * the tab shows, in one language, the heading's (the banner's title, which may be an English
 * fallback on a page in another language): the page's saved words in that language before it.
 * Where the page does not ship that language, the title is the page's English saved words alone,
 * marked English as the notice is: never English words before a title in another language, which
 * no one mark could name, nor a title that leaves the save unsaid.
 */
function titleAfterSave(heading: Text, pageLanguage: string): Text {
  // The heading's language is the page's where it carries no mark of its own.
  const { lang, texts, fellBack } = pageTexts(heading.lang ?? pageLanguage);
  if (fellBack) return { text: texts.savedTitle, lang };
  return { ...heading, text: `${texts.savedTitle} – ${heading.text}` };
}

/**
 * Failures only a submission the page's form never makes meets (not the form, another method, a
 * body too large or unreadable): the page says the choices were not saved, what was wrong with
 * what was sent, and how to save them.
 */
const SUBMISSION_FAILURES = new Set([
  "unsupported_form",
  "method_not_allowed",
  "body_too_large",
  "invalid_request",
]);

/** What a failure's page says: its title, heading and text, and whether it links back. */
interface FailureWords {
  title: string;
  heading: string;
  text: string;
  /** A link back to the settings page, from which saving or opening it again can succeed. */
  back: boolean;
}

/**
 * The words for a failure. A visit gets the failure's own title and text, the service's being
 * briefly unavailable included (a moment's wait), and where opening the link again can succeed (a
 * moment for the service briefly unavailable, a minute over the rate limit, later for any other
 * failure of the service's) a link to the page. A save that was not made says so first, in its
 * heading and title, then why: where saving again from the page can succeed (after a minute for the
 * rate limit, a moment for an unavailable service, later for a fault of the service, at once for a
 * submission the page's form never makes), with its own sentence and the link back; where it cannot
 * (a link that no longer works, a banner gone), with the visit's title and text as the reason. A
 * failure only a submission meets is a save that was not made, whatever the method.
 */
function failureWords(
  code: string | undefined,
  texts: PageTexts,
  submitted: boolean,
): FailureWords {
  const named = code ?? "other";
  const known = Object.hasOwn(texts.errors, named) || Object.hasOwn(texts.notSaved.because, named);
  const key = known ? named : "other";
  const visit = Object.hasOwn(texts.errors, key) ? texts.errors[key as ErrorCode] : undefined;
  const retry = Object.hasOwn(texts.notSaved.because, key)
    ? texts.notSaved.because[key as RetryableSaveFailure]
    : undefined;
  // A visit while the service is briefly unavailable is told to open the link again in a moment;
  // one that meets any other failure of the service, to try again later; one over the rate limit,
  // to open it again after a minute: each from the link to the page itself they are given.
  if (!submitted && !SUBMISSION_FAILURES.has(key)) {
    const [title, text] = visit ?? (key === "unavailable" ? texts.unavailable : texts.errors.other);
    const back = key === "rate_limited" || key === "unavailable" || key === "other";
    return { title, heading: title, text, back };
  }
  const heading = texts.notSaved.title;
  const title = visit ? `${heading} – ${visit[0]}` : heading;
  if (retry !== undefined) return { title, heading, text: retry, back: true };
  const [reason, remedy] = visit ?? texts.errors.other;
  return { title, heading, text: `${reason}. ${remedy}`, back: false };
}

/**
 * The colours of every failure page: the page's own (pageColors), worked out once rather than for
 * each page, a flood's 429 pages included.
 */
const FAILURE_COLORS = pageColors();

/**
 * A clear page for a link that cannot be used, in the browser's language where the page ships
 * it (page-texts.ts); never internal detail (decisions §5). `submitted`: the failure answers a
 * submission of the form, so the page says the choices were not saved, and why (failureWords).
 */
export function errorPage(
  code: string | undefined,
  nonce: string,
  languageCode: string,
  submitted = false,
): string {
  const { lang, texts } = pageTexts(languageCode);
  const { title, heading, text, back } = failureWords(code, texts, submitted);
  // A submission came from this link's address, as a visit did: the page it names (an empty href
  // is the page's own address, read with GET) is one step away.
  const link = back ? `\n<p><a href="">${escapeHtml(texts.openSettings)}</a></p>` : "";
  const body = `<h1>${escapeHtml(heading)}</h1>\n<p>${escapeHtml(text)}</p>${link}`;
  return document(lang, { text: title }, body, nonce, FAILURE_COLORS);
}
