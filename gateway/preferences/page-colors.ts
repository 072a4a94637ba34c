import { contrastShortfalls, DEFAULT_COLORS } from "#daemon/banners/colors.js";
import { type ColorRoles, rolesOf } from "#daemon/banners/contrast.js";

/** The page's own pairs: it has filled buttons only, none outlined as the banner's are. */
const shortfalls = (colors: ColorRoles) => contrastShortfalls(colors, false);

/**
 * The colours the preferences page is drawn in: the banner's, so the visitor sees the site's
 * look, as long as every pair the page shows meets WCAG 2.2 AA (text and button text 4.5:1, the
 * focus ring and checkboxes 3:1; daemon/banners/contrast.ts). A pair that fails is drawn in the
 * default colours of its two roles; when the mix still fails a pair (the roles the pairs share,
 * the background above all, now meet colours they were not chosen for), the whole page takes
 * the defaults. A visitor always gets a readable page, whatever the operator configured.
 */
function readableColors(configured: ColorRoles): ColorRoles {
  const failing = shortfalls(configured);
  if (failing.length === 0) return configured;
  const mixed = { ...configured };
  for (const role of failing.flatMap(rolesOf)) mixed[role] = DEFAULT_COLORS[role];
  return shortfalls(mixed).length === 0 ? mixed : { ...DEFAULT_COLORS };
}

/**
 * The dark scheme of the page's own colours (the defaults), for a visitor whose system prefers
 * it: light text and buttons on a near-black background, every pair meeting AA as the light
 * ones do (text and button text well above 4.5:1, the accent above 3:1).
 */
const DARK_COLORS: Readonly<ColorRoles> = {
  primary: "#f2f2f2",
  secondary: "#121212",
  text: "#e6e6e6",
  accent: "#66b2ff",
};

/** The page's colours: always a light scheme, and a dark one where it follows the visitor's. */
export interface PageColors {
  light: ColorRoles;
  dark?: ColorRoles;
}

/**
 * The colours a page is drawn in (readableColors) and, when they are the page's own defaults
 * (no colours configured, a failure page, or a configuration that fell back to them), their dark
 * scheme for `prefers-color-scheme: dark`. A site's own colours are its look, as on its banner,
 * which follows no scheme: they stay as they are in both.
 */
export function pageColors(configured: ColorRoles = DEFAULT_COLORS): PageColors {
  const light = readableColors(configured);
  const roles = Object.keys(DEFAULT_COLORS) as (keyof ColorRoles)[];
  const ownDefaults = roles.every((role) => light[role] === DEFAULT_COLORS[role]);
  return ownDefaults ? { light, dark: { ...DARK_COLORS } } : { light };
}
