import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MAX_STREAMS_PER_CONNECTION } from "#daemon/server.js";
import { MAX_FIRST_READS, MAX_HELD_READS, readsAtBound } from "#gateway/loader/reads-in-flight.js";
import {
  createBanner,
  createTeam,
  http,
  mintKey,
  publishConfiguration,
} from "#test/support/api.js";
import { bannerReadRelay, gatewayThroughRelay } from "#test/support/daemon-relay.js";
import { startTestService } from "#test/support/service.js";

const STALE = "public, max-age=60, stale-while-revalidate=60";
const SERVED_STALE =
  "the daemon could not be reached or has not answered: loaders are served as last read";
/**
 * More banners held than the streams left on the gateway's connection once first reads hold theirs.
 */
const HELD_BANNERS = MAX_STREAMS_PER_CONNECTION - MAX_FIRST_READS + 8;

/** Runs `task` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, task: (item: T) => Promise<R>) {
  const results: R[] = [];
  for (let start = 0; start < items.length; start += width) {
    results.push(...(await Promise.all(items.slice(start, start + width).map(task))));
  }
  return results;
}

/**
 * Regression: re-reads of banners held (every 30 s per banner, after a publish, every 5 s while
 * served stale) were not bounded, and a read the daemon leaves unanswered (its store stalled) stays
 * in flight after its request is answered from the held copy: with many banners held, the stuck
 * re-reads and the first reads together took every one of the daemon's 256 streams on the gateway's
 * one connection, and every other call, REST ones included, waited behind them. Re-reads are
 * bounded (reads-in-flight.ts): past the bound a held banner is served as held, marked stale, at
 * once and without a call, and the REST routes keep streams of their own.
 */
describe("the loader of a stand-alone gateway whose daemon leaves the re-reads of banners held unanswered", () => {
  it(`sends at most ${MAX_HELD_READS} re-reads, serving the other banners held stale at once, and REST calls are answered`, async () => {
    const daemon = await startTestService();
    // Banner reads counted, their answers held once `relay.hold()` is called.
    const relay = await bannerReadRelay(daemon.daemonUrl);
    const gateway = await gatewayThroughRelay(daemon, relay.url);
    const { service, logs, loader } = gateway;
    try {
      const { key } = await mintKey(service, await createTeam(service, "enterprise"));
      const banners = await inBatches(Array.from({ length: HELD_BANNERS }), 16, async () => {
        const banner = await createBanner(service, key);
        const served = await loader(banner.publicId);
        expect(served.status).toBe(200);
        return { ...banner, text: served.text };
      });
      // Each publish marks its banner for a re-read on its next request.
      await inBatches(banners, 16, (banner) =>
        publishConfiguration(service, key, banner.id, { position: "top" }),
      );

      relay.hold();
      const before = relay.reads;
      // Made-up ids hold as many streams as first reads may (reads-in-flight.ts), answered 503
      // later.
      const firstReads = Array.from({ length: MAX_FIRST_READS }, () => loader(randomUUID()));
      await expect.poll(() => relay.reads, { timeout: 30_000 }).toBe(before + MAX_FIRST_READS);

      // Up to the bound, each banner held is read again, and served as held once overdue.
      const reRead = banners.slice(0, MAX_HELD_READS);
      const waiting = reRead.map((banner) => loader(banner.publicId));
      await expect
        .poll(() => relay.reads, { timeout: 30_000 })
        .toBe(before + MAX_FIRST_READS + MAX_HELD_READS);
      // Past it, served as held, marked stale, without a call: answered while every read sent is
      // still held by the relay.
      const pastBound = banners.slice(MAX_HELD_READS);
      const atOnce = await Promise.all(pastBound.map((banner) => loader(banner.publicId)));
      expect(relay.reads).toBe(before + MAX_FIRST_READS + MAX_HELD_READS);
      const answers = [...(await Promise.all(waiting)), ...atOnce];
      expect(
        answers.map((answer) => [answer.status, answer.headers.get("cache-control"), answer.text]),
      ).toEqual([...reRead, ...pastBound].map((banner) => [200, STALE, banner.text]));

      // The other calls still have streams on the gateway's connection to the daemon.
      const listed = await http(service, "GET", `/api/v1/banners/${banners[0]?.id}`, { key });
      expect(listed.status).toBe(200);
      expect(relay.reads).toBe(before + MAX_FIRST_READS + MAX_HELD_READS);

      // The operator is told why banners are served as last read.
      const causes = logs.filter((entry) => entry.msg === SERVED_STALE).map((entry) => entry.cause);
      expect(causes).toContain(`[unavailable] ${readsAtBound("held", MAX_HELD_READS).rawMessage}`);
      for (const answer of await Promise.all(firstReads)) expect(answer.status).toBe(503);
      expect(logs.filter((entry) => entry.level === 50)).toEqual([]);
    } finally {
      await gateway.close();
      await relay.close();
      await daemon.close();
    }
  });
});
