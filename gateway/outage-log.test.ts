import { connect, createServer, type Socket } from "node:net";
import { pino } from "pino";
import { describe, expect, it, type TestContext } from "vitest";
import { loadConfig } from "#daemon/config.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { startGateway } from "#gateway/main.js";
import { http } from "#test/support/api.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { startTestService } from "#test/support/service.js";

const UNREACHABLE =
  "the daemon could not be reached or has not answered: requests are answered 503";
const SERVED_STALE =
  "the daemon could not be reached or has not answered: loaders are served as last read";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The gateway's interval between outage lines, shortened from REPEATED_FAILURE_LOG_MS (10 s): long
 * enough that the second of two requests back to back falls within it, on a loaded machine too.
 */
const INTERVAL_MS = 3_000;

/** A TCP relay to the daemon's port that `cut()` closes for good: the daemon then refuses. */
async function cuttableRelay(daemonUrl: string) {
  const { port } = new URL(daemonUrl);
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = connect(Number(port), "127.0.0.1");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const address = relay.address();
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`,
    cut: () =>
      new Promise<void>((resolve) => {
        relay.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      }),
  };
}

/**
 * The outage lines of a gateway that closes while it holds some back (outage-log.ts): they are
 * told as it closes, and none comes after, where the held lines were told by a timer up to an
 * interval (10 s) after the close, read in a log as another gateway's (one built after it in the
 * same process).
 *
 * The two tests run side by side: each has a daemon, a relay and a gateway of its own, and spends
 * most of its time waiting out the interval (INTERVAL_MS) after its gateway's close.
 */
describe("a gateway that closes during an outage of its daemon", {
  timeout: 30_000,
  concurrent: true,
}, () => {
  /**
   * A daemon, a gateway calling it through a relay that `cut()` closes, and the gateway's log
   * lines; all of them closed when the test ends.
   */
  async function gatewayThroughRelay({ onTestFinished }: Pick<TestContext, "onTestFinished">) {
    const service = await startTestService();
    onTestFinished(() => service.close());
    const lines: Record<string, unknown>[] = [];
    const relay = await cuttableRelay(service.daemonUrl);
    onTestFinished(relay.cut);
    const gateway = await startGateway({
      config: loadConfig({ CONSENT_HTTP_PORT: "0", CONSENT_DAEMON_URL: relay.url }),
      transport: createDaemonTransport({ baseUrl: relay.url }),
      operatorToken: service.operatorToken,
      logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
      repeatedFailureLogMs: INTERVAL_MS,
    });
    onTestFinished(gateway.close);
    const through = { ...service, gatewayUrl: gateway.url };
    const linesSaying = (msg: string) => lines.filter((line) => line.msg === msg);
    return { relay, gateway, through, linesSaying };
  }

  it("tells the requests answered 503 that it held back as it closes, and nothing after", async (context) => {
    const { relay, gateway, through, linesSaying } = await gatewayThroughRelay(context);
    const { key } = await bannerFixture(through);
    await relay.cut();
    const banners = () => http(through, "GET", "/api/v1/banners", { key });
    expect([(await banners()).status, (await banners()).status]).toEqual([503, 503]);
    expect(linesSaying(UNREACHABLE)).toMatchObject([{ level: 40, failedRequests: 1 }]);
    const warnedAt = Date.now();

    await gateway.close();
    expect(linesSaying(UNREACHABLE)).toMatchObject([
      { level: 40, failedRequests: 1 },
      { level: 40, failedRequests: 1 },
    ]);
    await pause(warnedAt + INTERVAL_MS + 500 - Date.now());
    expect(linesSaying(UNREACHABLE)).toHaveLength(2);
  });

  it("tells the loader reads it held back as it closes, and nothing after", async (context) => {
    const { relay, gateway, through, linesSaying } = await gatewayThroughRelay(context);
    const [one, two] = [await bannerFixture(through), await bannerFixture(through)];
    const loader = (publicId: string) => http(through, "GET", `/loader/${publicId}.js`);
    expect([(await loader(one.publicId)).status, (await loader(two.publicId)).status]).toEqual([
      200, 200,
    ]);
    // An edit this gateway relays has its loader read again on its next request (routes.ts).
    for (const { key, id } of [one, two]) {
      const edit = await http(through, "PATCH", `/api/v1/banners/${id}`, {
        key,
        body: { name: "Shop, edited" },
      });
      expect(edit.status).toBe(200);
    }
    await relay.cut();
    const stale = [await loader(one.publicId), await loader(two.publicId)];
    expect(stale.map((answer) => answer.status)).toEqual([200, 200]);
    expect(linesSaying(SERVED_STALE)).toMatchObject([{ level: 40, staleBanners: 1 }]);
    const warnedAt = Date.now();

    await gateway.close();
    expect(linesSaying(SERVED_STALE)).toMatchObject([
      { level: 40, staleBanners: 1 },
      { level: 40, staleBanners: 2, failedSincePreviousLine: 0 },
    ]);
    await pause(warnedAt + INTERVAL_MS + 500 - Date.now());
    expect(linesSaying(SERVED_STALE)).toHaveLength(2);
  });
});
