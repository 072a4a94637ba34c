/**
 * WCAG 2.2 AA contrast of a banner's colours: one implementation for the banner runtime (which
 * reads colours through the browser, gateway/runtime/contrast.ts) and the server (which reads
 * them with daemon/banners/colors.ts: the preferences page and `consentctl banners`). The runtime
 * bundles this file, so it stays small and imports nothing.
 */

/** A colour as what shows of it: sRGB channels 0-255 and an alpha 0-1, `[r, g, b, alpha]`. */
export type Rgba = readonly number[];

/**
 * The configuration's colours by role (decisions §3 configuration fields): secondary is the
 * background, text the body text, primary the buttons (their text in secondary), accent the
 * focus ring and checkboxes.
 */
export interface ColorRoles {
  primary: string;
  secondary: string;
  text: string;
  accent: string;
}

export type ColorRole = keyof ColorRoles;

/**
 * One pair of colours a reader sees together, named by its configuration fields ("textColor on
 * secondaryColor"), its contrast, and the least AA asks of it: 4.5 for text (WCAG 1.4.3), 3 for
 * the focus ring (1.4.11). A tuple, as the runtime's bundle keeps no property names short.
 */
export type ContrastCheck = readonly [pair: string, ratio: number, needed: number];

/** A colour painted over an opaque one: what the eye sees of a see-through colour. */
function over([r = 0, g = 0, b = 0, alpha = 1]: Rgba, under: Rgba): Rgba {
  return [r, g, b].map((channel, i) => channel * alpha + (under[i] ?? 0) * (1 - alpha));
}

/** WCAG 2.2 relative luminance (its definition's 0.04045 threshold). */
function luminance([r = 0, g = 0, b = 0]: Rgba): number {
  const channel = (value: number) => {
    const c = value / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
}

/** The contrast ratio of a colour shown on an opaque ground, 1 to 21. */
function shownOn(color: Rgba, ground: Rgba): number {
  const [light, dark] = [luminance(over(color, ground)), luminance(ground)].sort(
    (x, y) => y - x,
  ) as [number, number];
  return (light + 0.05) / (dark + 0.05);
}

/**
 * The AA checks of the colours as the banner and the preferences page use them: body text on the
 * background and button text on buttons 4.5:1, the focus ring on the background 3:1. A see-through
 * colour counts as what shows: painted over what lies under it, the background over white (a
 * page's usual ground). `read` turns a configured colour into what shows of it: the browser's
 * reading in the runtime, readColor on the server. `outlined`: the banner also has outlined
 * buttons (primary text on the background), which the preferences page has not.
 */
export function contrastChecks(
  colors: ColorRoles,
  read: (color: string) => Rgba,
  outlined = true,
): ContrastCheck[] {
  const [text, background, button, accent] = [
    colors.text,
    colors.secondary,
    colors.primary,
    colors.accent,
  ].map(read) as [Rgba, Rgba, Rgba, Rgba];
  const panel = over(background, [255, 255, 255]);
  const buttons = shownOn(background, over(button, panel));
  return [
    ["textColor on secondaryColor", shownOn(text, panel), 4.5],
    [
      "secondaryColor on primaryColor (buttons)",
      outlined ? Math.min(buttons, shownOn(button, panel)) : buttons,
      4.5,
    ],
    ["accentColor (focus ring) on secondaryColor", shownOn(accent, panel), 3],
  ];
}

/** The roles a check's pair is made of: its name names their configuration fields. */
export function rolesOf([pair]: ContrastCheck): ColorRole[] {
  return (pair.match(/[a-z]+(?=Color)/g) ?? []) as ColorRole[];
}

/**
 * A failed check in words. The ratio is cut, never rounded, to two decimals: 4.499:1 reads
 * 4.49:1, not a 4.50:1 that would seem to meet 4.5:1.
 */
export function shortfallMessage([pair, ratio, needed]: ContrastCheck): string {
  return `${pair}: contrast ${(Math.floor(ratio * 100) / 100).toFixed(2)}:1 is below WCAG 2.2 AA (${needed}:1)`;
}
