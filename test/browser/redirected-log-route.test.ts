import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  dialog,
  NONCE,
  skipBrowserTests,
  useBrowserSite,
  useTestPage,
  waitForRows,
} from "#test/support/browser.js";
import { bannerFixture } from "#test/support/consent-log.js";

/**
 * decisions §5 in real Chromium: a site reaching the service through an address of its own that
 * redirects to the gateway (a short link, a host being moved). A request a redirect takes across
 * origins carries `Origin: null` and the page's Referer; the domain check reads the Referer then.
 */
describe.skipIf(skipBrowserTests)(
  "banner runtime in Chromium: a log route behind a redirect",
  () => {
    const ctx = useBrowserSite();
    const tab = useTestPage(() => ctx.browser);
    /** The site's own address in front of the gateway, redirecting to it. */
    let front: Server;
    let frontUrl = "";
    beforeAll(async () => {
      // Redirects every request to the gateway: the loader (302) and the log route (307, keeping
      // the POST and its body), allowing any origin to follow it, as a plain redirect host would.
      front = createServer((request, response) => {
        response
          .writeHead(request.method === "POST" ? 307 : 302, {
            location: `${ctx.service.gatewayUrl}${request.url}`,
            "access-control-allow-origin": "*",
          })
          .end();
      });
      await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
      frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((resolve) => front?.close(() => resolve())));

    // Chromium sends the redirected post with `Origin: null` and `Referer: <the page's origin>/`.
    it("records a choice whose post a redirect took across origins", async () => {
      const { teamId, publicId } = await bannerFixture(ctx.service, { domain: "localhost" });
      const url = ctx.site.page(`/${publicId}`, {
        publicId,
        noLoaderTag: true,
        head: `<script src="${frontUrl}/loader/${publicId}.js" nonce="${NONCE}"></script>`,
        connectSrc: frontUrl,
      });
      await tab.page.goto(url);
      await dialog(tab.page).getByRole("button", { name: "Accept all" }).click();
      const rows = await waitForRows(ctx.service, teamId, 1);
      expect(rows.map((row) => [row.method, row.pageUrl])).toEqual([
        ["accept_all", new URL(url).origin],
      ]);
    });
  },
);
