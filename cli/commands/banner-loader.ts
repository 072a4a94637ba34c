import { messageJson } from "#cli/format.js";
import { type Banner, BannerSchema } from "#gen/consent/v1/banner_pb.js";

/** decisions §6: the loader URL is `{CONSENT_BASE_URL}/loader/{publicId}.js`. */
export function loaderUrl(baseUrl: string, publicId: string): string {
  return `${baseUrl.replace(/\/$/, "")}/loader/${publicId}.js`;
}

/**
 * The tag an integrator pastes first into their pages' `<head>`: a plain (blocking) script, so
 * the Consent Mode defaults and script gating are in place before any tag it governs runs
 * (docs/banner-runtime.md, "Embedding").
 */
export function loaderSnippet(baseUrl: string, publicId: string): string {
  return `<script src="${loaderUrl(baseUrl, publicId)}"></script>`;
}

/** A banner as `--json` prints it: the Banner message plus its loader URL and snippet. */
export function bannerJson(banner: Banner, baseUrl: string) {
  return {
    ...(messageJson(BannerSchema, banner) as object),
    loaderUrl: loaderUrl(baseUrl, banner.publicId),
    loaderSnippet: loaderSnippet(baseUrl, banner.publicId),
  };
}
