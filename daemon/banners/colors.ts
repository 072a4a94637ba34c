import {
  type ColorRoles,
  type ContrastCheck,
  contrastChecks,
  type Rgba,
} from "#daemon/banners/contrast.js";
import { NAMED_COLORS } from "#daemon/banners/named-colors.js";

const HEX = /^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$/i;
// A CSS <number>: digits, or digits on both sides of a point, or a point and digits ("1." is not
// one). Unambiguous, so the patterns below never backtrack far.
const NUMBER = String.raw`[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?`;
/** CSS whitespace (CSS Syntax §4.2): not the Unicode spaces JavaScript's \s also matches. */
const WS = String.raw`[ \t\n\r\f]`;
/** Longer than any colour written sensibly ("hsla(359.5deg, 100%, 100%, 0.25)" is 33). */
const MAX_LENGTH = 100;
const PERCENT = `${NUMBER}%`;
/** <hue>: a number (degrees) or an angle. */
const HUE = `${NUMBER}(?:deg|grad|rad|turn)?`;
const ALPHA = `${NUMBER}%?`;
const COMMA = `${WS}*,${WS}*`;
const functional = (body: string) => new RegExp(`^${body}$`, "i");
/**
 * rgb()/rgba()/hsl()/hsla() as CSS Color 4 writes them (§5.1, §7.1): the legacy form with commas
 * (rgb: three numbers or three percentages; hsl: a hue and two percentages; an optional alpha)
 * and the modern form with spaces (numbers, percentages or `none` in any mix, alpha after "/").
 * A browser drops anything else, and the banner would lose the colour without a word.
 */
const FUNCTIONAL = [
  functional(
    String.raw`rgba?\(${WS}*(?:${NUMBER}${COMMA}${NUMBER}${COMMA}${NUMBER}|${PERCENT}${COMMA}${PERCENT}${COMMA}${PERCENT})(?:${COMMA}${ALPHA})?${WS}*\)`,
  ),
  functional(
    String.raw`hsla?\(${WS}*${HUE}${COMMA}${PERCENT}${COMMA}${PERCENT}(?:${COMMA}${ALPHA})?${WS}*\)`,
  ),
  functional(
    String.raw`rgba?\(${WS}*(?:(?:${NUMBER}%?|none)${WS}+){2}(?:${NUMBER}%?|none)(?:${WS}*/${WS}*(?:${ALPHA}|none))?${WS}*\)`,
  ),
  functional(
    String.raw`hsla?\(${WS}*(?:${HUE}|none)${WS}+(?:${NUMBER}%?|none)${WS}+(?:${NUMBER}%?|none)(?:${WS}*/${WS}*(?:${ALPHA}|none))?${WS}*\)`,
  ),
];

/** A number as Chromium's quick colour reading takes it: no sign but "-", no exponent. */
const PLAIN = String.raw`-?(?:\d+(?:\.\d+)?|\.\d+)`;
/**
 * The modern hsl() Chromium reads quickly: plain numbers, the hue in degrees or an angle unit, and
 * saturation and lightness as percentages, an alpha as a number right before the ")" (the
 * name's case is judged apart).
 */
const QUICK_HSL = new RegExp(
  String.raw`^hsla?\(${WS}*${PLAIN}(?:deg|grad|rad|turn)?${WS}+${PLAIN}%${WS}+${PLAIN}%(?:${WS}*/${WS}*${PLAIN}|${WS}*)\)$`,
  "i",
);

/**
 * Whether Chromium clamps an hsl()'s saturation and lightness to 100% (as CSS Color 3 did) where
 * CSS Color 4 §7.1 keeps them: in the legacy form with commas, and in the modern form it reads
 * quickly, with the name in lower case (so `HSL(…)`, `none`, an exponent, a number saturation or
 * a percentage alpha keep them).
 */
const hslClampedTo100 = (value: string) =>
  value.includes(",") || (value.startsWith("hsl") && QUICK_HSL.test(value));

/** spec 2.1's default colours, by role (daemon/banners/contrast.ts); each pair meets WCAG 2.2 AA. */
export const DEFAULT_COLORS: Readonly<ColorRoles> = {
  primary: "#000000",
  secondary: "#ffffff",
  text: "#333333",
  accent: "#007bff",
};

/** A configuration's colour fields (the stored one's or the API's message's). */
interface ConfiguredColors {
  primaryColor?: string;
  secondaryColor?: string;
  textColor?: string;
  accentColor?: string;
}

/** A configuration's colours by role, one unset (absent or empty in a message) its default. */
export function colorRolesOf(configuration: ConfiguredColors | undefined): ColorRoles {
  return {
    primary: configuration?.primaryColor || DEFAULT_COLORS.primary,
    secondary: configuration?.secondaryColor || DEFAULT_COLORS.secondary,
    text: configuration?.textColor || DEFAULT_COLORS.text,
    accent: configuration?.accentColor || DEFAULT_COLORS.accent,
  };
}

/**
 * decisions §3: colours end up inside CSS, so only these forms pass: hex, rgb()/rgba()/hsl()/hsla()
 * with numeric arguments, and CSS named colours.
 */
export function isColor(value: string): boolean {
  return (
    value.length <= MAX_LENGTH &&
    (HEX.test(value) ||
      FUNCTIONAL.some((form) => form.test(value)) ||
      NAMED_COLORS.has(value.toLowerCase()))
  );
}

const clamp = (value: number, low: number, high: number) => Math.min(high, Math.max(low, value));

/**
 * A <number>, a <percentage> of `full`, or `none` (0), as CSS Color 4 §4.4 reads them. One too
 * large for a double (1e999) is the largest finite one, as CSS Values 4 §10.9 clamps it.
 */
function component(token: string, full: number): number {
  if (token.toLowerCase() === "none") return 0;
  const value = token.endsWith("%") ? (Number.parseFloat(token) / 100) * full : Number(token);
  return clamp(value, -Number.MAX_VALUE, Number.MAX_VALUE);
}

/** Degrees per unit of <angle> (CSS Values 4 §7.1); a bare number is degrees. */
const DEGREES: Record<string, number> = { deg: 1, grad: 0.9, rad: 180 / Math.PI, turn: 360 };

/** A <hue> in degrees; `none` and one too large for a double (1e999deg) are 0, as browsers read them. */
function hueDegrees(token: string): number {
  const [, amount = "0", unit = "deg"] = /^(.*?)(deg|grad|rad|turn)?$/i.exec(token) ?? [];
  const degrees = Number(amount) * (DEGREES[unit.toLowerCase()] ?? 1);
  return token.toLowerCase() === "none" || !Number.isFinite(degrees) ? 0 : degrees;
}

/** CSS Color 4 §7.1's hslToRgb: hue in degrees, saturation and lightness in percent, to 0-255. */
function hslToRgb(hue: number, saturation: number, lightness: number): number[] {
  const s = saturation / 100;
  const l = lightness / 100;
  const f = (n: number) => {
    const k = (n + hue / 30) % 12;
    return (l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1))) * 255;
  };
  return [f(0), f(8), f(4)];
}

/** #rgb, #rgba, #rrggbb, #rrggbbaa. */
function hexColor(digits: string): Rgba {
  const full = digits.length <= 4 ? [...digits].map((digit) => digit + digit).join("") : digits;
  const [r = 0, g = 0, b = 0, alpha = 255] = (full.match(/../g) ?? []).map((pair) =>
    Number.parseInt(pair, 16),
  );
  return [r, g, b, alpha / 255];
}

/** rgb()/rgba()/hsl()/hsla(), legacy (commas) or modern (spaces, alpha after "/"). */
function functionalColor(value: string): Rgba {
  const open = value.indexOf("(");
  const hsl = value.slice(0, 3).toLowerCase() === "hsl";
  const [a = "", b = "", c = "", alpha = "1"] = value
    .slice(open + 1, -1)
    .trim()
    .split(/[ \t\n\r\f]*[,/][ \t\n\r\f]*|[ \t\n\r\f]+/);
  // Out-of-range channels are clamped when the colour is used (CSS Color 4 §5.1, §7.1). Saturation
  // and lightness are read as Chromium reads them: below 0 they are 0, and above 100 they are
  // kept (hsl(4deg 167 61%) is rgb(255, 12, 0)) but where it reads them as CSS Color 3 did
  // (hsl(4deg 167% 61%) is rgb(255, 69, 56)): hslClampedTo100.
  const high = hslClampedTo100(value) ? 100 : Number.MAX_VALUE;
  const [saturation, lightness] = [component(b, 100), component(c, 100)].map((percent) =>
    clamp(percent, 0, high),
  ) as [number, number];
  const channels = hsl
    ? hslToRgb(((hueDegrees(a) % 360) + 360) % 360, saturation, lightness)
    : [component(a, 255), component(b, 255), component(c, 255)];
  // Whole channels, as a browser computes the colour (getComputedStyle gives rgb(128, 0, 13)).
  return [
    ...channels.map((channel) => Math.round(clamp(channel, 0, 255))),
    clamp(component(alpha, 1), 0, 1),
  ];
}

/**
 * What a colour isColor accepts shows, as sRGB and alpha, read as a browser reads it (CSS Color
 * 4): so the server can judge the configured colours' contrast (daemon/banners/contrast.ts)
 * without a browser. Undefined for anything isColor refuses.
 */
export function readColor(value: string): Rgba | undefined {
  if (!isColor(value)) return undefined;
  const [r = 0, g = 0, b = 0, alpha = 1] = value.startsWith("#")
    ? hexColor(value.slice(1))
    : (NAMED_COLORS.get(value.toLowerCase()) ?? functionalColor(value));
  return [r, g, b, reportedAlpha(alpha)];
}

/**
 * An alpha as a browser keeps and reports it (CSS Color 4 §15.2): in 8 bits, printed with the
 * fewest decimals that keep them (0x10 is 0.063). The runtime reads it so, and the server's
 * ratios are then the runtime's, to the last decimal.
 */
function reportedAlpha(alpha: number): number {
  const bits = Math.round(alpha * 255);
  const short = Math.round((bits / 255) * 100) / 100;
  return Math.round(short * 255) === bits ? short : Math.round((bits / 255) * 1000) / 1000;
}

/** A colour readColor cannot read (none isColor accepts) shows nothing: a browser drops it. */
const shown = (color: string): Rgba => readColor(color) ?? [0, 0, 0, 0];

/**
 * The AA checks (daemon/banners/contrast.ts) the configured colours fail, judged on the server.
 * `outlined`: as contrastChecks, whether outlined buttons are drawn (the banner's are).
 */
export function contrastShortfalls(colors: ColorRoles, outlined = true): ContrastCheck[] {
  return contrastChecks(colors, shown, outlined).filter(([, ratio, needed]) => ratio < needed);
}
