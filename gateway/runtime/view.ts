import type { RuntimeConfig } from "./config.js";
import { warnOnLowContrast } from "./contrast.js";
import { bannerCss } from "./styles.js";
import {
  categoryNotes,
  directionOf,
  languageMark,
  type ResolvedTexts,
  type Text,
  type TextKey,
} from "./texts.js";

export type Choice = "accept" | "reject" | "save";

export interface ViewOptions {
  config: RuntimeConfig;
  texts: ResolvedTexts;
  nonce: string;
  /** Categories shown as switched on. */
  accepted: readonly string[];
  /** Open on the category list (preferences re-opened) rather than the first view. */
  customize: boolean;
  /** Escape closes without a choice: only when the visitor has a current choice already. */
  dismissible: boolean;
  onChoice(choice: Choice, selected: string[]): void;
  /** The view has closed, however: a choice, Escape, or the function showBanner returns. */
  onClose(): void;
}

/** Creates an element with properties, attributes (aria-*, role) and children; never innerHTML. */
function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<HTMLElementTagNameMap[K]> = {},
  attributes: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const element = Object.assign(document.createElement(tag), props);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

/** An element's text and, when it differs from the banner's, its language and direction. */
function say(text: Text): Partial<HTMLElement> {
  return { textContent: text.text, ...languageMark(text) };
}

/** Constructed stylesheets need no CSP allowance; older browsers get a `<style>` with the nonce. */
function addStyles(shadow: ShadowRoot, css: string, nonce: string): void {
  if ("adoptedStyleSheets" in shadow && "replaceSync" in CSSStyleSheet.prototype) {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    shadow.adoptedStyleSheets = [sheet];
  } else {
    shadow.append(h("style", { nonce, textContent: css }));
  }
}

/**
 * Inline banners go into `[data-consent-banner]` when the page has one. Everything else comes
 * first in the body, so keyboard and screen-reader users meet the banner before the page.
 */
function mount(host: HTMLElement, config: RuntimeConfig): void {
  const slot = config.layout === "inline" && document.querySelector("[data-consent-banner]");
  if (slot) slot.append(host);
  else if (config.layout === "inline" && config.position === "bottom") document.body.append(host);
  else document.body.prepend(host);
}

/** The category switches, required ones locked on; hidden until Customize. */
function categoryList(options: ViewOptions) {
  const { config, texts } = options;
  const boxes: HTMLInputElement[] = [];
  const labels = config.categories.map((category, i) => {
    const text = texts.category(category);
    // Named by its label (and, when locked, the note saying why), described by its description
    // and its services: a long description read as the box's name would drown it.
    const caption = h("span", {}, {}, h("b", { id: `l${i}`, ...say(text.label) }));
    if (category.required) {
      caption.append(" ", h("i", { id: `n${i}`, ...say(texts.get("alwaysOnLabel")) }));
    }
    const notes = categoryNotes(text, i);
    for (const [id, line] of notes) caption.append(h("small", { id, ...say(line) }));
    const box = h(
      "input",
      {
        type: "checkbox",
        name: category.name,
        checked: category.required || options.accepted.includes(category.name),
        disabled: category.required,
      },
      {
        "aria-labelledby": category.required ? `l${i} n${i}` : `l${i}`,
        ...(notes[0] && { "aria-describedby": notes.map(([id]) => id).join(" ") }),
      },
    );
    boxes.push(box);
    return h("label", {}, {}, box, caption);
  });
  const attributes = { role: "group", "aria-label": texts.get("customize").text };
  return { boxes, list: h("div", { hidden: !options.customize }, attributes, ...labels) };
}

/** The dialog: title, description (with the privacy policy link), categories, buttons. */
function dialogPanel(options: ViewOptions) {
  const { config, texts } = options;
  const text = texts.get("description");
  const description = h("p", say(text), { id: "d" });
  const policy = texts.get("privacyPolicyUrl");
  if (policy.text) {
    // Inside the description: a link in another language than it says its own.
    const label = texts.get("privacyPolicyLabel");
    const own =
      label.lang === text.lang
        ? { textContent: label.text }
        : say({ lang: texts.languageCode, ...label });
    // A policy taken from another language's texts is a page in that language: it says so.
    const hreflang = policy.lang ? { hreflang: policy.lang } : {};
    description.append(" ", h("a", { href: policy.text, ...hreflang, ...own }));
  }
  const button = (action: string, key: TextKey, outlined = false) =>
    h(
      "button",
      { type: "button", ...say(texts.get(key)), className: outlined ? "o" : "" },
      {
        "data-a": action,
      },
    );
  const customize = button("customize", "customize", true);
  const save = button("save", "save", true);
  customize.hidden = options.customize;
  save.hidden = !options.customize;
  const { boxes, list } = categoryList(options);
  const buttons = [button("accept", "acceptAll"), button("reject", "rejectAll"), customize, save];
  const panel = h(
    "div",
    { className: "p" },
    {
      role: "dialog",
      "aria-modal": String(config.layout === "modal"),
      // Focusable itself, so a modal opens on the dialog, not on one of its choices.
      tabindex: "-1",
      "aria-labelledby": "t",
      "aria-describedby": "d",
    },
    h("h2", say(texts.get("title")), { id: "t" }),
    description,
    list,
    h("div", { className: "b" }, {}, ...buttons),
  );
  return { panel, boxes, list, customize, save };
}

/**
 * Renders the banner in a shadow root: a dialog (modal with backdrop and focus trap, or a
 * non-modal banner or inline box) with Accept all, Reject all and Customize, and a category list
 * whose required entries are locked on. Returns a function that removes it.
 */
export function showBanner(options: ViewOptions): () => void {
  const { config } = options;
  const modal = config.layout === "modal";
  const previousFocus = document.activeElement as HTMLElement | null;
  const host = h("div", { id: `consent-banner-${config.id.slice(0, 8)}` });
  // The page's own rules beat :host ones (`div:empty{display:none}` is common); an important
  // inline declaration, set through CSSOM as a strict CSP allows, beats them all.
  host.style.setProperty("display", "block", "important");
  const shadow = host.attachShadow({ mode: "open" });
  addStyles(shadow, bannerCss(config.colors), options.nonce);
  const { panel, boxes, list, customize, save } = dialogPanel(options);
  // The texts' language and direction, whatever the page's (WCAG 3.1.2, an Arabic banner on an
  // English page reads right to left).
  const { languageCode } = options.texts;
  const root = h(
    "div",
    { className: `r ${config.layout} ${config.position}`, lang: languageCode },
    { dir: directionOf(languageCode) },
  );
  if (modal) {
    // Focus trap, part 3: a click on the backdrop takes no focus, which would leave the dialog
    // for <body> (no focusin to bring it back), where Escape no longer reaches the dialog.
    const backdrop = root.appendChild(h("div", { className: "bd" }));
    backdrop.addEventListener("mousedown", (event) => event.preventDefault());
  }
  root.append(panel);
  shadow.append(root);
  mount(host, config);
  const probe = shadow.appendChild(h("span"));
  warnOnLowContrast(probe, config);
  probe.remove();

  const focusable = () =>
    Array.from(panel.querySelectorAll<HTMLElement>("a[href],input:not(:disabled),button")).filter(
      (element) => !element.closest("[hidden]"),
    );
  const firstControl = () => boxes.find((box) => !box.disabled) ?? save;
  // Focus trap, part 1: in a modal, focus that leaves the dialog comes back to it.
  const keepFocus = (event: FocusEvent) => {
    if (event.target !== host) panel.focus();
  };
  const edge = () => (config.layout === "banner" ? reserveEdge(panel, config.position) : undefined);
  let release = modal ? holdPageScroll() : edge();
  // A page that renders its body anew (a framework's hydration, a client-side route, one that
  // puts a new <body> in place as Turbo does) may take the banner out with it: it goes back
  // until the visitor chooses, so the question is not lost and a modal does not leave the page
  // held still with nothing on screen. A banner at an edge reserves its room in the new body.
  const stayMounted = new MutationObserver(() => {
    if (host.isConnected || !document.body) return;
    mount(host, config);
    if (!modal) {
      release?.();
      release = edge();
    }
  });
  stayMounted.observe(document.documentElement, { childList: true, subtree: true });
  let closed = false;
  const close = () => {
    // Once: a view closed by Escape may be closed again by the next showPreferences.
    if (closed) return;
    closed = true;
    options.onClose();
    stayMounted.disconnect();
    // Focus inside the banner (a modal, re-opened preferences, a clicked button) goes back to
    // where it was before, whatever the layout, rather than to the top of the page.
    const focused = document.activeElement === host;
    document.removeEventListener("focusin", keepFocus);
    release?.();
    host.remove();
    if (focused) previousFocus?.focus?.();
  };
  panel.addEventListener("click", (event) => {
    const action = (event.target as HTMLElement).closest("button")?.dataset.a;
    if (action === "customize") {
      list.hidden = save.hidden = false;
      customize.hidden = true;
      firstControl().focus();
    } else if (action) {
      const selected = boxes.filter((box) => box.checked).map((box) => box.name);
      close();
      options.onChoice(action as Choice, selected);
    }
  });
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && options.dismissible) close();
    if (event.key === "Tab" && modal) wrapTab(event, focusable(), shadow.activeElement);
  });
  if (modal) document.addEventListener("focusin", keepFocus);
  if (options.customize) firstControl().focus();
  else if (modal) panel.focus();
  return close;
}

/**
 * WCAG 2.2 2.4.11 (focus not obscured): while a banner is fixed to the top or bottom edge, the
 * page keeps that much room free at the edge (scroll padding, so focus scrolls a control clear of
 * the banner, and body padding, so the page's last controls can scroll above it). Set through
 * CSSOM, which a strict CSP allows; the page's own values come back when the banner closes.
 * Returns the function that gives the room back.
 */
function reserveEdge(panel: HTMLElement, position: string): (() => void) | undefined {
  if (position === "center") return undefined;
  const edge = position === "top" ? "Top" : "Bottom";
  const page = document.documentElement.style;
  const body = document.body.style;
  const scrollPadding = `scrollPadding${edge}` as const;
  const padding = `padding${edge}` as const;
  const saved = [page[scrollPadding], body[padding]] as const;
  const base = Number.parseFloat(getComputedStyle(document.body)[padding]) || 0;
  const reserve = () => {
    const height = panel.offsetHeight;
    page[scrollPadding] = `${height}px`;
    body[padding] = `${base + height}px`;
  };
  const observer = new ResizeObserver(reserve);
  observer.observe(panel);
  reserve();
  return () => {
    observer.disconnect();
    [page[scrollPadding], body[padding]] = saved;
  };
}

/** A modal keeps the page behind its backdrop still; the page's own overflow comes back after. */
function holdPageScroll(): () => void {
  const page = document.documentElement.style;
  const saved = page.overflow;
  page.overflow = "hidden";
  return () => {
    page.overflow = saved;
  };
}

/**
 * Focus trap, part 2: Tab past the last control (or Shift+Tab before the first) wraps around;
 * from the dialog itself, Tab goes to the first control and Shift+Tab to the last.
 */
function wrapTab(event: KeyboardEvent, elements: HTMLElement[], active: Element | null): void {
  const edge = event.shiftKey ? elements[0] : elements.at(-1);
  if (active !== edge && elements.includes(active as HTMLElement)) return;
  event.preventDefault();
  (event.shiftKey ? elements.at(-1) : elements[0])?.focus();
}
