import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { loadConfig } from "#daemon/config.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { HELD_READ_WAIT_MS } from "#gateway/loader/stale-if-error.js";
import { startGateway } from "#gateway/main.js";
import {
  createBanner,
  createTeam,
  http,
  mintKey,
  publishConfiguration,
} from "#test/support/api.js";
import { watchingBannerReads } from "#test/support/banner-reads.js";
import {
  endpoints,
  operatorTokenOf,
  startDaemon,
  useProgramRoot,
} from "#test/support/processes.js";

const USUAL = "public, max-age=300, stale-while-revalidate=60";

/**
 * A gateway whose event loop is held by a long synchronous task past a loader read's bound
 * (stale-if-error.ts, failed-reads.ts): timers run before the loop reads its sockets, so the bound
 * is judged only once the loop has read what arrived meanwhile. The daemon is a process of its
 * own, so it answers while the gateway's loop is held; the gateway runs in the test's process, so
 * the test can hold its loop.
 */
describe("the loader of a gateway whose event loop stalls", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-loader-stalled-gateway-");

  it("serves the daemon's answer that arrived during a stall past the read's bound, not the held copy", async () => {
    const dataDir = dirs.join("data");
    const { program: daemon, url: daemonUrl } = await startDaemon(dataDir);
    const daemonPid = daemon.child.pid as number;
    const operatorToken = await operatorTokenOf(dataDir);
    let onBannerRead = () => {};
    const gateway = await startGateway({
      config: loadConfig({ CONSENT_HTTP_PORT: "0" }),
      transport: watchingBannerReads(createDaemonTransport({ baseUrl: daemonUrl }), () =>
        onBannerRead(),
      ),
      operatorToken,
      logger: pino({ level: "silent" }),
    });
    const service = endpoints({ daemonUrl, gatewayUrl: gateway.url, operatorToken });
    try {
      const { key } = await mintKey(service, await createTeam(service, "professional"));
      const { id, publicId } = await createBanner(service, key);
      const served = await http(service, "GET", `/loader/${publicId}.js`);
      expect([served.status, served.headers.get("cache-control")]).toEqual([200, USUAL]);
      // A change relayed by this gateway: its next request reads the daemon, the copy held.
      await publishConfiguration(service, key, id, { layout: "modal" });

      // The daemon holds the read until the gateway's loop is held: 300 ms after the read is
      // sent (its bytes long written), a synchronous task continues the daemon and runs until
      // well past the read's bound. The daemon answers meanwhile, into the gateway's socket.
      daemon.child.kill("SIGSTOP");
      let readSentAt = 0;
      let stallEndedAt = 0;
      onBannerRead = () => {
        onBannerRead = () => {};
        readSentAt = Date.now();
        setTimeout(() => {
          setImmediate(() => {
            process.kill(daemonPid, "SIGCONT");
            stallEndedAt = readSentAt + HELD_READ_WAIT_MS + 800;
            while (Date.now() < stallEndedAt) {
              // The gateway's loop is held, as by a long synchronous task.
            }
          });
        }, 300);
      };
      let fresh: Awaited<ReturnType<typeof http>>;
      try {
        fresh = await http(service, "GET", `/loader/${publicId}.js`);
      } finally {
        daemon.child.kill("SIGCONT");
      }
      expect(stallEndedAt - readSentAt).toBeGreaterThan(HELD_READ_WAIT_MS);
      expect([fresh.status, fresh.headers.get("cache-control")]).toEqual([200, USUAL]);
      expect(fresh.text).toContain('"layout":"modal"');
      expect(fresh.headers.get("etag")).not.toBe(served.headers.get("etag"));
    } finally {
      await gateway.close();
    }
    expect(await daemon.stop()).toBe(0);
  });
});
