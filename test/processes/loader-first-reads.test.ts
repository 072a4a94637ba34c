import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MAX_STREAMS_PER_CONNECTION } from "#daemon/server.js";
import { unansweredRead } from "#gateway/daemon-failures.js";
import { MAX_FIRST_READS, readsAtBound } from "#gateway/loader/reads-in-flight.js";
import { FIRST_READ_WAIT_MS } from "#gateway/loader/stale-if-error.js";
import {
  createBanner,
  createTeam,
  type HttpResult,
  http,
  mintKey,
  publishConfiguration,
} from "#test/support/api.js";
import { bannerReadRelay, gatewayThroughRelay } from "#test/support/daemon-relay.js";
import { startTestService } from "#test/support/service.js";

const STALE = "public, max-age=60, stale-while-revalidate=60";
const OUTAGE = "the daemon could not be reached or has not answered: requests are answered 503";
const UNAVAILABLE = {
  error: "The service is temporarily unavailable; retry later",
  code: "unavailable",
};

const refusal = (answer: HttpResult) => [
  answer.status,
  answer.body,
  answer.headers.get("retry-after"),
  answer.headers.get("cache-control"),
];

/**
 * Regression: each public id asked for started a daemon read, made-up ids included, and a read the
 * daemon leaves unanswered (its store stalled) stays in flight past the visitor's 503, so ids
 * cycled during a slow-store period made the gateway hold a call each; past the daemon's 256
 * streams on the gateway's one connection, every other call waited behind them. Reads of banners
 * held nowhere are bounded (reads-in-flight.ts): past the bound such a banner is answered 503 at
 * once without a call, and banners already served, and the REST routes, are not starved.
 */
describe("the loader of a stand-alone gateway whose daemon leaves banner reads unanswered", () => {
  it(`sends at most ${MAX_FIRST_READS} reads of banners it holds no copy of, answering more 503 at once, and serves a held banner`, async () => {
    const daemon = await startTestService();
    // Banner reads counted, their answers held once `relay.hold()` is called.
    const relay = await bannerReadRelay(daemon.daemonUrl);
    const gateway = await gatewayThroughRelay(daemon, relay.url);
    const { service, logs, loader } = gateway;
    try {
      const { key } = await mintKey(service, await createTeam(service));
      const served = await createBanner(service, key);
      const unserved = await createBanner(service, key);
      const first = await loader(served.publicId);
      expect(first.status).toBe(200);

      relay.hold();
      const before = relay.reads;
      // Made-up ids, each a read the daemon does not answer: up to the bound, each is sent.
      const bounded = Array.from({ length: MAX_FIRST_READS }, () => loader(randomUUID()));
      await expect.poll(() => relay.reads, { timeout: 30_000 }).toBe(before + MAX_FIRST_READS);
      // Past it, a banner held nowhere is answered 503 at once, no call sent, made up or not: as
      // many more as the daemon takes calls at once on the gateway's connection.
      const past = await Promise.all(
        Array.from({ length: MAX_STREAMS_PER_CONNECTION }, () => loader(randomUUID())),
      );
      expect(relay.reads).toBe(before + MAX_FIRST_READS);
      for (const answer of past)
        expect(refusal(answer)).toEqual([503, UNAVAILABLE, "1", "no-store"]);
      expect(refusal(await loader(unserved.publicId))).toEqual([503, UNAVAILABLE, "1", "no-store"]);
      expect(relay.reads).toBe(before + MAX_FIRST_READS);

      // A banner served before is read again once changed, outside the bound, and served as last
      // read while that read goes unanswered.
      await publishConfiguration(service, key, served.id, { position: "top" });
      const held = await loader(served.publicId);
      expect([held.status, held.headers.get("cache-control"), held.text]).toEqual([
        200,
        STALE,
        first.text,
      ]);
      expect(relay.reads).toBe(before + MAX_FIRST_READS + 1);
      // The other calls still have streams on the gateway's connection to the daemon.
      const listed = await http(service, "GET", `/api/v1/banners/${served.id}`, { key });
      expect(listed.status).toBe(200);

      // The reads sent are answered 503 once overdue, as before, and the refusals are counted in
      // the outage warning rather than logged one by one.
      for (const answer of await Promise.all(bounded)) {
        expect([answer.status, answer.body]).toEqual([503, UNAVAILABLE]);
      }
      // Hundreds of requests answered 503, two causes warned of: the bound, the reads unanswered.
      const outage = logs.filter((entry) => entry.msg === OUTAGE).map((entry) => entry.cause);
      expect(outage.sort()).toEqual(
        [
          `[unavailable] ${readsAtBound("first", MAX_FIRST_READS).rawMessage}`,
          `[unavailable] ${unansweredRead(FIRST_READ_WAIT_MS).rawMessage}`,
        ].sort(),
      );
      expect(logs.filter((entry) => entry.level === 50)).toEqual([]);
    } finally {
      await gateway.close();
      await relay.close();
      await daemon.close();
    }
  });
});
