import type { RuntimeConfig } from "./config.js";

/**
 * The banner's stylesheet, inside its shadow root so neither the site's CSS nor ours leaks across.
 * Colours come from the configuration, which the daemon validated (decisions §3: hex, numeric
 * functional forms or named colours only), so they are safe to place in CSS.
 * Roles: secondary = background, text = body text, primary = buttons, accent = focus ring.
 * Positions move the fixed layouts only: an inline box stays where the page flow puts it. The
 * panel's transparent border is its edge in forced colours, where the shadow is dropped.
 * The host's reset is important: important declarations of a shadow root's own `:host` beat the
 * page's, so no rule of the page on the host (`div{transform:…}`, which would pin the fixed panel
 * to the host, `opacity`, `white-space:nowrap`, `* {all:unset}`) reaches in. A checkbox is 24 px
 * square, WCAG 2.2 2.5.8's minimum target (buttons are larger).
 */
export function bannerCss({
  primary: p,
  secondary: s,
  text: t,
  accent: a,
}: RuntimeConfig["colors"]) {
  return `:host{all:initial!important;display:block!important}
.r{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:${t};overflow-wrap:anywhere}
.r *{box-sizing:border-box}
.p{background:${s};color:${t};padding:16px 20px;max-height:90vh;overflow:auto;box-shadow:0 2px 16px rgba(0,0,0,.3);border:1px solid transparent}
.banner .p,.modal .p{position:fixed;z-index:2147483647}
.banner .p{left:0;right:0}
.top .p{top:0}.bottom .p{bottom:0}.banner.center .p,.modal.center .p{top:50%}.banner.center .p{transform:translateY(-50%)}
.modal .p{left:50%;width:min(36rem,calc(100% - 2rem));border-radius:8px;transform:translateX(-50%)}
.modal.top .p{top:1rem}.modal.bottom .p{bottom:1rem}.modal.center .p{transform:translate(-50%,-50%)}
.bd{position:fixed;inset:0;background:rgba(0,0,0,.5);z-index:2147483646}
.inline .p{border:1px solid ${t};border-radius:8px;margin:1rem 0;box-shadow:none}
h2{font-size:1.15em;margin:0 0 .5em}
p{margin:0 0 .75em}
a{color:inherit}
.b{display:flex;flex-wrap:wrap;gap:.5rem}
button{font:inherit;cursor:pointer;padding:.5em 1.2em;border-radius:4px;border:2px solid ${p};background:${p};color:${s}}
button.o{background:${s};color:${p}}
:focus-visible{outline:3px solid ${a};outline-offset:2px}
.p:focus{outline:0}
label{display:flex;gap:.6em;margin:0 0 .75em}
input{accent-color:${a};width:24px;height:24px;margin:0;flex:none}
small{display:block}
[hidden]{display:none!important}`;
}
