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
export function readableColors(configured: ColorRoles): ColorRoles {
  const failing = shortfalls(configured);
  if (failing.length === 0) return configured;
  const mixed = { ...configured };
  for (const role of failing.flatMap(rolesOf)) mixed[role] = DEFAULT_COLORS[role];
  return shortfalls(mixed).length === 0 ? mixed : { ...DEFAULT_COLORS };
}
