import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBanner, createTeam, http, mintKey, operator } from "#test/support/api.js";
import { launchChromium, skipBrowserTests, useTestPage } from "#test/support/browser.js";
import { freePort } from "#test/support/processes.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * Sibling hosts of one site: the service's (the dashboard's origin, CONSENT_BASE_URL) and another
 * subdomain serving someone else's pages. Chromium resolves both to the loopback address.
 */
const SITE = "shop.test";
const DASHBOARD_HOST = `dash.${SITE}`;
const SIBLING_HOST = `pages.${SITE}`;

/** A page of the sibling subdomain that sets `cookie` (its own script, as any page may). */
async function startSibling(cookie: string) {
  const server: Server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    response.end(`<!doctype html><html lang="en"><head><title>Pages</title></head><body>
<script>document.cookie = ${JSON.stringify(cookie)}; document.title = "set"</script></body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://${SIBLING_HOST}:${(server.address() as AddressInfo).port}/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** decisions §2 in real Chromium: the dashboard session cookie, against another subdomain's. */
describe.skipIf(skipBrowserTests)("dashboard sessions in Chromium", () => {
  let service: TestService;
  let browser: Browser;
  let dashboard: string;

  beforeAll(async () => {
    const port = await freePort();
    dashboard = `http://${DASHBOARD_HOST}:${port}`;
    service = await startTestService({
      gateway: true,
      env: { CONSENT_HTTP_PORT: String(port), CONSENT_BASE_URL: dashboard },
    });
    browser = await launchChromium({
      args: [`--host-resolver-rules=MAP *.${SITE} 127.0.0.1`],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
  });
  const tab = useTestPage(() => browser);

  it("refuses the dashboard's requests, instead of using another team's session, once a sibling subdomain set its own consent_session for the parent domain", async () => {
    const { admin, auth } = operator(service);
    const victim = await createTeam(service);
    const attacker = await createTeam(service);
    const attackerKey = (await mintKey(service, attacker)).key;
    await createBanner(service, attackerKey, { name: "Attacker's banner" });
    const victimSession = (await admin.createSession({ teamId: victim }, auth)).token;
    const attackerSession = (await admin.createSession({ teamId: attacker }, auth)).token;
    // The dashboard's cookie, as docs/behaviour.md advises it.
    await tab.context.addCookies([
      {
        name: "consent_session",
        value: victimSession,
        domain: DASHBOARD_HOST,
        path: "/api/v1",
        httpOnly: true,
        sameSite: "Strict",
      },
    ]);
    const sibling = await startSibling(
      `consent_session=${attackerSession}; domain=${SITE}; path=/api/v1/banners`,
    );
    try {
      await tab.page.goto(sibling.url);
      await tab.page.waitForFunction(() => document.title === "set");
    } finally {
      await sibling.close();
    }
    // The dashboard's own page (any page of its origin) lists, then creates, with its Origin.
    await tab.page.goto(`${dashboard}/api/v1/health`);
    const answers = await tab.page.evaluate(async () => {
      const list = await fetch("/api/v1/banners");
      const create = await fetch("/api/v1/banners", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          name: "Victim's banner",
          domain: "victim.example.com",
          configuration: {},
        }),
      });
      return Promise.all(
        [list, create].map(async (r) => ({ status: r.status, body: await r.json() })),
      );
    });
    for (const answer of answers) {
      expect(answer).toEqual({
        status: 401,
        body: {
          data: {
            code: "unauthorized",
            error: expect.stringMatching(
              /^The request carries 2 different consent_session cookies/,
            ),
          },
          version: "v1",
        },
      });
    }
    // Nothing landed in the other team.
    const listed = await http(service, "GET", "/api/v1/banners", { key: attackerKey });
    expect(listed.body.data.banners.map((b: { name: string }) => b.name)).toEqual([
      "Attacker's banner",
    ]);
  });
});
