import { contrastChecks, type Rgba, shortfallMessage } from "../../daemon/banners/contrast.js";
import type { RuntimeConfig } from "./config.js";
import { warn } from "./console-lines.js";

/** The browser's own reading of a CSS colour (hex, functional or named) as [r, g, b, alpha]. */
function rgbaOf(probe: HTMLElement, color: string): Rgba {
  probe.style.color = "";
  probe.style.color = color;
  const [r = 0, g = 0, b = 0, alpha = 1] = (
    getComputedStyle(probe).color.match(/[\d.]+/g) ?? []
  ).map(Number);
  return [r, g, b, alpha];
}

/** The colours were judged: each loader runs its own runtime, so this is once per banner. */
let judged = false;

/**
 * WCAG 2.2 AA check of the configured colours, as the banner uses them (daemon/banners/contrast.ts,
 * shared with the server). A shortfall is a console warning for the site owner, once per page
 * (the colours do not change when the banner opens again); the banner still shows.
 */
export function warnOnLowContrast(probe: HTMLElement, { id, colors }: RuntimeConfig): void {
  if (judged) return;
  judged = true;
  const checks = contrastChecks(colors, (color) => rgbaOf(probe, color));
  for (const check of checks) {
    if (check[1] < check[2]) warn(id, shortfallMessage(check));
  }
}
