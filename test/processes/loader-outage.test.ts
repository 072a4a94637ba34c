import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import {
  FIRST_READ_WAIT_MS,
  HELD_READ_WAIT_MS,
  STALE_RETRY_MS,
} from "#gateway/loader/stale-if-error.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { createBanner, createTeam, type HttpResult, http, mintKey } from "#test/support/api.js";
import { callCountingProxy } from "#test/support/call-counting-proxy.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import {
  endpoints,
  operatorTokenOf,
  PROGRAMS,
  STANDALONE_GATEWAY_URL,
  startDaemon,
  startProgram,
  startSplitService,
  useProgramRoot,
} from "#test/support/processes.js";

const USUAL = "public, max-age=300, stale-while-revalidate=60";
const STALE = "public, max-age=60, stale-while-revalidate=60";
const UNAVAILABLE = {
  error: "The service is temporarily unavailable; retry later",
  code: "unavailable",
};

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface TimedAnswer extends HttpResult {
  sentAt: number;
  answeredAt: number;
  waitedMs: number;
}

/** A request for a banner's loader, with when it was sent and answered (this machine's clock). */
async function timedLoader(
  service: Parameters<typeof http>[0],
  publicId: string,
): Promise<TimedAnswer> {
  const sentAt = Date.now();
  const answer = await http(service, "GET", `/loader/${publicId}.js`);
  const answeredAt = Date.now();
  return { ...answer, sentAt, answeredAt, waitedMs: answeredAt - sentAt };
}

/**
 * When the gateway remembered a banner's read as failed, from the requests that got that failure
 * first: not before the first was sent and `atLeastMs` on (the read's bound, for a daemon that
 * cannot answer before it), not after the first answer.
 */
function failedBetween(first: TimedAnswer[], atLeastMs = 0): { from: number; by: number } {
  return {
    from: Math.min(...first.map((answer) => answer.sentAt)) + atLeastMs,
    by: Math.min(...first.map((answer) => answer.answeredAt)),
  };
}

/**
 * A 503 answered while the failure remembered within `window` holds: its Retry-After is the whole
 * seconds left until the daemon is asked again (STALE_RETRY_MS after the failure), at least 1,
 * as reckoned at some moment between the request's sending and its answer.
 */
function expectRetryAfter(answer: TimedAnswer, window: { from: number; by: number }): void {
  const secondsLeft = (retryAt: number, at: number) =>
    Math.max(1, Math.ceil((retryAt - at) / 1_000));
  const retryAfter = Number(answer.headers.get("retry-after"));
  expect(retryAfter).toBeGreaterThanOrEqual(
    secondsLeft(window.from + STALE_RETRY_MS, answer.answeredAt),
  );
  expect(retryAfter).toBeLessThanOrEqual(secondsLeft(window.by + STALE_RETRY_MS, answer.sentAt));
}

/** The gateway's warnings that requests are answered 503 for want of the daemon, from its log. */
function outageWarnings(log: string): Record<string, unknown>[] {
  return log
    .split("\n")
    .filter((line) => line.includes("requests are answered 503"))
    .map((line) => JSON.parse(line));
}

/** 503s in the loader's plain shape, asking for a retry when the daemon is asked again. */
function expectUnavailable(answers: TimedAnswer[], window: { from: number; by: number }): void {
  for (const answer of answers) {
    expect([answer.status, answer.body]).toEqual([503, UNAVAILABLE]);
    expectRetryAfter(answer, window);
  }
}

/**
 * Split mode while the daemon restarts or stalls (loader-cache.ts, stale-if-error): a loader the
 * gateway served keeps being served, unchanged, and a change published while the gateway hears
 * nothing of it is served within seconds of the daemon being back; what must be durable (the log
 * route, the preferences page) answers 503 in its own shape meanwhile.
 *
 * The two tests run side by side: each has programs and a data dir of its own, and each spends
 * most of its time waiting out the loader's bounds (5 s, 2 s) while its daemon is stopped.
 */
describe("the loader of a stand-alone gateway whose daemon is down", {
  timeout: 120_000,
  concurrent: true,
}, () => {
  const dirs = useProgramRoot("consent-loader-outage-");

  it("serves what it served while the daemon restarts, then the daemon's answer again", async () => {
    const split = await startSplitService(dirs.join("data"));
    const { gateway, service, restartDaemon } = split;
    let { daemon } = split;
    const { key } = await mintKey(service, await createTeam(service, "professional"));
    const { id, publicId } = await createBanner(service, key);
    const neverServed = await createBanner(service, key);
    const loader = (publicId: string, headers: Record<string, string> = {}) =>
      http(service, "GET", `/loader/${publicId}.js`, { headers });
    const served = await loader(publicId);
    expect([served.status, served.headers.get("cache-control")]).toEqual([200, USUAL]);
    const etag = served.headers.get("etag") as string;
    const logged = await postLog(service, aChoice(publicId, { method: "consent_given" }));
    const preferences = new URL(logged.body.managePreferences).pathname;
    // A draft edit relayed by this gateway: its next request reads the daemon, as it would 30 s on.
    const edit = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { layout: "modal" } },
    });
    expect(edit.status).toBe(200);

    expect(await daemon.program.stop()).toBe(0);
    const stale = await loader(publicId);
    expect([stale.status, stale.headers.get("etag"), stale.text]).toEqual([200, etag, served.text]);
    expect(stale.headers.get("cache-control")).toBe(STALE);
    const revalidated = await loader(publicId, { "if-none-match": etag });
    expect([revalidated.status, revalidated.headers.get("cache-control")]).toEqual([304, STALE]);
    // Nothing served before: 503 as before, in the loader's plain shape, with a retry asked for
    // when the daemon is asked again (in 5 s), counting down for the requests meanwhile.
    const unserved = await timedLoader(service, neverServed.publicId);
    expect([unserved.status, unserved.body]).toEqual([503, UNAVAILABLE]);
    const failed = failedBetween([unserved]);
    expectRetryAfter(unserved, failed);
    await pause(1_200);
    const unservedAgain = await timedLoader(service, neverServed.publicId);
    expect([unservedAgain.status, unservedAgain.body]).toEqual([503, UNAVAILABLE]);
    expectRetryAfter(unservedAgain, failed);
    // Writes are never answered from memory: the log route and the preferences page say 503.
    const choice = await postLog(service, aChoice(publicId));
    expect([choice.status, choice.body]).toEqual([
      503,
      {
        success: false,
        error: "The service is temporarily unavailable; retry later",
        code: "unavailable",
      },
    ]);
    expect(choice.headers.get("access-control-allow-origin")).toBe("https://shop.example.com");
    const page = await http(service, "GET", preferences);
    expect([page.status, page.headers.get("content-type")]).toEqual([
      503,
      "text/html; charset=utf-8",
    ]);
    expect(page.text).toContain("Wait a moment, then open this link again.");
    const save = await http(service, "POST", preferences, {
      body: "category=necessary",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(save.status).toBe(503);
    expect(save.text).toContain("Wait a moment, then open your privacy settings");

    // Back, with a publish this gateway hears nothing of: served at its next read, within
    // seconds (every 5 s while the daemon failed), long before its 30 s revalidation.
    daemon = await restartDaemon();
    const banners = createClient(BannerService, createGrpcTransport({ baseUrl: daemon.url }));
    await banners.publishBanner({ id }, { headers: { authorization: `Bearer ${key}` } });
    const backAt = Date.now();
    let fresh: HttpResult | undefined;
    while (Date.now() - backAt < 15_000) {
      fresh = await loader(publicId);
      if (fresh.text.includes('"layout":"modal"')) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(fresh?.text).toContain('"layout":"modal"');
    expect(fresh?.headers.get("etag")).not.toBe(etag);
    expect(fresh?.headers.get("cache-control")).toBe(USUAL);
    expect((await postLog(service, aChoice(publicId))).status).toBe(200);

    // Stalled (stopped, not gone): the read that finds it out fails only at the transport's ping
    // timeout (about 15 s), but the request is answered from the held copy after 2 s; then no
    // request waits for the daemon, not even while a retry is in flight.
    const again = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { layout: "banner" } },
    });
    expect(again.status).toBe(200);
    daemon.program.child.kill("SIGSTOP");
    try {
      const firstSentAt = Date.now();
      const first = await loader(publicId);
      expect([first.status, first.headers.get("cache-control")]).toEqual([200, STALE]);
      expect(Date.now() - firstSentAt).toBeLessThan(HELD_READ_WAIT_MS + 1_500);
      const stalledAt = Date.now();
      while (Date.now() - stalledAt < 7_000) {
        const sentAt = Date.now();
        const answer = await loader(publicId);
        expect([answer.status, answer.text]).toEqual([200, fresh?.text]);
        expect(Date.now() - sentAt).toBeLessThan(1_000);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    } finally {
      daemon.program.child.kill("SIGCONT");
    }
    expect(await gateway.stop()).toBe(0);
    expect(await daemon.program.stop()).toBe(0);
  });

  it("answers 503 within 5 s for a loader it never served while the daemon is stalled, asking it every 5 s, and serves a read that answers late", async () => {
    const dataDir = dirs.join("stalled");
    const { program: daemon, url: daemonUrl } = await startDaemon(dataDir);
    const proxy = await callCountingProxy(daemonUrl);
    try {
      const gateway = startProgram(PROGRAMS.gateway, {
        CONSENT_DATA_DIR: dataDir,
        CONSENT_DAEMON_URL: proxy.url,
      });
      const service = endpoints({
        daemonUrl,
        gatewayUrl: await gateway.waitFor(STANDALONE_GATEWAY_URL),
        operatorToken: await operatorTokenOf(dataDir),
      });
      const { key } = await mintKey(service, await createTeam(service, "professional"));
      const late = await createBanner(service, key);
      const { publicId } = await createBanner(service, key);
      const loader = (id = publicId) => timedLoader(service, id);
      const unavailable = (answer: HttpResult) => [answer.status, answer.body];

      // A first read the daemon answers only once it is continued: the requests get 503 after
      // 5 s, not at the transport's ping timeout (about 15 s), and the read, gone on meanwhile,
      // serves the request after its answer, without a second call.
      daemon.child.kill("SIGSTOP");
      let before = proxy.calls();
      try {
        const first = await Promise.all(Array.from({ length: 3 }, () => loader(late.publicId)));
        expectUnavailable(first, failedBetween(first, FIRST_READ_WAIT_MS));
        expect(proxy.calls()).toBe(before + 1);
        // Logged as a read the daemon has not answered, not as a daemon out of reach (in one
        // process, `npm start`, it is always reached: its store is what is slow), in the outage
        // warning sent at most every 10 s: at once for the first request, the others held back.
        await expect
          .poll(() => outageWarnings(gateway.stdout()))
          .toMatchObject([
            {
              level: 40,
              msg: "the daemon could not be reached or has not answered: requests are answered 503",
              cause: `[unavailable] the daemon has not answered a banner read within ${FIRST_READ_WAIT_MS} ms`,
              failedRequests: 1,
            },
          ]);
      } finally {
        daemon.child.kill("SIGCONT");
      }
      const continuedAt = Date.now();
      let answered = await loader(late.publicId);
      while (answered.status === 503 && Date.now() - continuedAt < STALE_RETRY_MS - 1_000) {
        await pause(100);
        answered = await loader(late.publicId);
      }
      expect([answered.status, answered.headers.get("cache-control")]).toEqual([200, USUAL]);
      expect(answered.text).toContain(late.publicId);
      expect(proxy.calls()).toBe(before + 1);

      daemon.child.kill("SIGSTOP");
      try {
        before = proxy.calls();
        // The read that finds it out is answered 503 after 5 s; the requests that come meanwhile
        // share that one read.
        const first = await Promise.all(Array.from({ length: 5 }, () => loader()));
        const window = failedBetween(first, FIRST_READ_WAIT_MS);
        expectUnavailable(first, window);
        for (const answer of first)
          expect(answer.waitedMs).toBeLessThan(FIRST_READ_WAIT_MS + 5_000);
        expect(proxy.calls()).toBe(before + 1);
        // Then, until the next read is due, 503 at once, the daemon not asked, and Retry-After
        // counting down the seconds left.
        while (Date.now() < window.from + STALE_RETRY_MS - 1_000) {
          const answer = await loader();
          expectUnavailable([answer], window);
          expect(answer.waitedMs).toBeLessThan(1_000);
          await pause(200);
        }
        expect(proxy.calls()).toBe(before + 1);
        // The first read goes on until the ping timeout, then fails, and the next read comes 5 s
        // after: one call per banner every 5 s at most, whatever the requests; none waits for a
        // read longer than 2 s meanwhile.
        const stalledAt = Date.now();
        let requests = 0;
        let retried: TimedAnswer | undefined;
        while (proxy.calls() === before + 1 && Date.now() - stalledAt < 30_000) {
          retried = await loader();
          requests++;
          expect(unavailable(retried)).toEqual([503, UNAVAILABLE]);
          expect(retried.waitedMs).toBeLessThan(HELD_READ_WAIT_MS + 2_000);
          const retryAfter = Number(retried.headers.get("retry-after"));
          expect(retryAfter).toBeGreaterThanOrEqual(1);
          expect(retryAfter).toBeLessThanOrEqual(STALE_RETRY_MS / 1_000);
          await pause(200);
        }
        expect(proxy.calls()).toBe(before + 2);
        expect(requests).toBeGreaterThan(10);
        // That read, unanswered after 2 s, counts as failed: the requests after it get the 503
        // at once, with the seconds left until the next read.
        const during = await Promise.all(Array.from({ length: 5 }, () => loader()));
        expectUnavailable(during, failedBetween([retried as TimedAnswer], HELD_READ_WAIT_MS));
        expect(proxy.calls()).toBe(before + 2);
      } finally {
        daemon.child.kill("SIGCONT");
      }
      // Back: served within seconds of the daemon answering.
      const backAt = Date.now();
      let served: HttpResult | undefined;
      while (Date.now() - backAt < 30_000) {
        served = await loader();
        if (served.status === 200) break;
        await pause(200);
      }
      expect([served?.status, served?.headers.get("cache-control")]).toEqual([200, USUAL]);
      expect(await gateway.stop()).toBe(0);
      expect(await daemon.stop()).toBe(0);
    } finally {
      await proxy.close();
    }
  });
});
