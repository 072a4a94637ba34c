import { messageJson } from "#cli/format.js";
import { type Banner, BannerSchema } from "#gen/consent/v1/banner_pb.js";

/**
 * decisions §6: the loader URL, `{CONSENT_BASE_URL}/loader/{publicId}.js`, as the daemon names it
 * from its own CONSENT_BASE_URL (Banner.loader_url). A daemon from before that field leaves it
 * empty, and the CLI's own CONSENT_BASE_URL stands in.
 */
export function loaderUrl(banner: Banner, fallbackBaseUrl: string): string {
  return banner.loaderUrl || `${fallbackBaseUrl.replace(/\/$/, "")}/loader/${banner.publicId}.js`;
}

/**
 * The tag an integrator pastes first into their pages' `<head>`: a plain (blocking) script, so
 * the Consent Mode defaults and script gating are in place before any tag it governs runs
 * (docs/banner-runtime.md, "Embedding").
 */
export function loaderSnippet(banner: Banner, fallbackBaseUrl: string): string {
  return `<script src="${loaderUrl(banner, fallbackBaseUrl)}"></script>`;
}

/** A banner as `--json` prints it: the Banner message plus its loader URL and snippet. */
export function bannerJson(banner: Banner, baseUrl: string) {
  return {
    ...(messageJson(BannerSchema, banner) as object),
    loaderUrl: loaderUrl(banner, baseUrl),
    loaderSnippet: loaderSnippet(banner, baseUrl),
  };
}
