import type { RuntimeConfig } from "./config.js";

/** The browser's own reading of a CSS colour (hex, functional or named) as [r, g, b, alpha]. */
function rgbaOf(probe: HTMLElement, color: string): number[] {
  probe.style.color = "";
  probe.style.color = color;
  const [r = 0, g = 0, b = 0, alpha = 1] = (
    getComputedStyle(probe).color.match(/[\d.]+/g) ?? []
  ).map(Number);
  return [r, g, b, alpha];
}

/** A colour painted over an opaque one: what the eye sees of a see-through colour. */
function over([r = 0, g = 0, b = 0, alpha = 1]: number[], under: number[]): number[] {
  return [r, g, b].map((channel, i) => channel * alpha + (under[i] ?? 0) * (1 - alpha));
}

/** WCAG 2.2 relative luminance. */
function luminance([r = 0, g = 0, b = 0]: number[]): number {
  const channel = (value: number) => {
    const c = value / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
}

function ratio(a: number[], b: number[]): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (light + 0.05) / (dark + 0.05);
}

/**
 * WCAG 2.2 AA check of the configured colours, as the banner uses them: body text on the
 * background and button text on buttons need 4.5:1 (1.4.3), the focus ring on the background 3:1
 * (1.4.11). A see-through colour counts as what shows: painted over what lies under it, the
 * background over white (a page's usual ground). A shortfall is a console warning for the site
 * owner; the banner still shows.
 */
export function warnOnLowContrast(probe: HTMLElement, colors: RuntimeConfig["colors"]): void {
  const [text, background, button, accent] = [
    colors.text,
    colors.secondary,
    colors.primary,
    colors.accent,
  ].map((color) => rgbaOf(probe, color)) as [number[], number[], number[], number[]];
  const panel = over(background, [255, 255, 255]);
  const filled = over(button, panel);
  const checks: [string, number, number][] = [
    ["textColor on secondaryColor", ratio(over(text, panel), panel), 4.5],
    [
      "secondaryColor on primaryColor (buttons)",
      // Filled buttons, and the outlined ones (primaryColor on the background).
      Math.min(ratio(over(background, filled), filled), ratio(over(button, panel), panel)),
      4.5,
    ],
    ["accentColor (focus ring) on secondaryColor", ratio(over(accent, panel), panel), 3],
  ];
  for (const [pair, value, needed] of checks) {
    if (value < needed) {
      console.warn(
        `[consent banner] ${pair}: contrast ${value.toFixed(2)}:1 is below WCAG 2.2 AA (${needed}:1)`,
      );
    }
  }
}
