import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { REPEATED_FAILURE_LOG_MS } from "#daemon/logging.js";
import { LoaderCache } from "#gateway/loader/loader-cache.js";
import type { LoaderVariant } from "#gateway/loader/loader-response.js";
import {
  FIRST_READ_WAIT_MS,
  HELD_READ_WAIT_MS,
  STALE_IF_ERROR_MS,
  STALE_RETRY_MS,
} from "#gateway/loader/stale-if-error.js";
import { BannerService, type PublishedBanner } from "#gen/consent/v1/banner_pb.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

const REVALIDATE_MS = 30_000;

/** A promise with its outcome readable without awaiting it. */
function watched<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

/** The code of the failure a watched request ended with. */
const codeOf = (request: { error?: unknown }) =>
  request.error === undefined ? undefined : ConnectError.from(request.error).code;

/**
 * A daemon that stops answering (a stalled process or store) fails a read only at the
 * transport's ping timeout; meanwhile a banner held in memory is served from it once its re-read
 * has been in flight HELD_READ_WAIT_MS (stale-if-error.ts), and a banner with no copy to serve is
 * answered the failure once its read has been in flight FIRST_READ_WAIT_MS (failed-reads.ts). The
 * banners are read from a real daemon first; then the daemon's reads do not settle until the test
 * answers them, under fake timers and the cache's injected clock.
 */
describe("LoaderCache while its daemon does not answer", () => {
  let service: TestService;
  let banners: Client<typeof BannerService>;
  let now = 0;
  let fetches = 0;
  /** What the daemon does with a read: answer it (the real daemon), or nothing for now. */
  let read: (publicId: string) => Promise<PublishedBanner | null>;
  const fromDaemon = async (publicId: string) => {
    try {
      return (await banners.getPublishedBanner({ publicId })).banner ?? null;
    } catch (error) {
      if (ConnectError.from(error).code === Code.NotFound) return null;
      throw error;
    }
  };
  /** Reads that have not answered yet, to answer them as the daemon would have. */
  const unanswered: { publicId: string; answer: (banner: PublishedBanner | null) => void }[] = [];
  const stalled = (publicId: string) =>
    new Promise<PublishedBanner | null>((answer) => unanswered.push({ publicId, answer }));
  const cache = new LoaderCache({
    revalidateMs: REVALIDATE_MS,
    now: () => now,
    fetchBanner(publicId) {
      fetches++;
      return read(publicId);
    },
  });

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    banners = createClient(BannerService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  });
  afterAll(() => service.close());
  afterEach(() => {
    vi.useRealTimers();
    read = fromDaemon;
  });

  it("answers from the held banner once its re-read has been in flight 2 s, and all requests after at once", async () => {
    read = fromDaemon;
    const { publicId } = await bannerFixture(service);
    const first = (await cache.variant(publicId, null)) as LoaderVariant;
    expect(first.stale).toBeUndefined();

    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    read = stalled;
    now += REVALIDATE_MS;
    const before = fetches;
    const waiting = watched(cache.variant(publicId, null));
    await vi.advanceTimersByTimeAsync(HELD_READ_WAIT_MS - 1);
    expect(waiting.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(waiting.value).toMatchObject({
      stale: true,
      hash: first.hash,
      identity: first.identity,
    });
    // The read goes on: one in flight, and every request meanwhile answered without waiting.
    const meanwhile = watched(
      Promise.all(Array.from({ length: 10 }, () => cache.variant(publicId, null))),
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(meanwhile.value?.every((v) => v?.stale && v.hash === first.hash)).toBe(true);
    expect(fetches).toBe(before + 1);
    // What the held copy is built from is unchanged: the fresh response stays unmarked.
    expect(first.stale).toBeUndefined();

    // Its answer, late, serves the requests after it as read.
    const late = unanswered.find((pending) => pending.publicId === publicId);
    late?.answer(await fromDaemon(publicId));
    await vi.advanceTimersByTimeAsync(0);
    const after = await cache.variant(publicId, null);
    expect(after?.stale).toBeUndefined();
    expect(after?.hash).toBe(first.hash);
    expect(fetches).toBe(before + 1);
  });

  it("answers a banner never read, or read more than a day ago, 503 once its read has been in flight 5 s, and serves the read's late answer", async () => {
    read = fromDaemon;
    const [held, unserved] = await Promise.all([bannerFixture(service), bannerFixture(service)]);
    const readAt = now;
    await cache.variant(held.publicId, null);

    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    read = stalled;
    now = readAt + STALE_IF_ERROR_MS;
    const before = fetches;
    const neverRead = [1, 2, 3].map(() => watched(cache.variant(unserved.publicId, null)));
    const tooOld = watched(cache.variant(held.publicId, null));
    await vi.advanceTimersByTimeAsync(FIRST_READ_WAIT_MS - 1);
    expect([...neverRead, tooOld].some((request) => request.settled)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect([...neverRead, tooOld].map(codeOf)).toEqual(Array(4).fill(Code.Unavailable));
    expect(fetches).toBe(before + 2);
    // Remembered as a failed read: answered at once, without a call, until the next read is due,
    // each with the whole seconds left until then.
    expect(cache.retryAfterSeconds(unserved.publicId)).toBe(STALE_RETRY_MS / 1_000);
    now += 1_500;
    expect(cache.retryAfterSeconds(unserved.publicId)).toBe(4);
    const meanwhile = watched(cache.variant(unserved.publicId, null));
    await vi.advanceTimersByTimeAsync(0);
    expect(codeOf(meanwhile)).toBe(Code.Unavailable);
    // Past the window with the read still in flight: no second read, the failure at once, and a
    // retry asked for in a second (the read may answer at any time).
    now += STALE_RETRY_MS;
    const joined = watched(cache.variant(unserved.publicId, null));
    await vi.advanceTimersByTimeAsync(0);
    expect(codeOf(joined)).toBe(Code.Unavailable);
    expect(cache.retryAfterSeconds(unserved.publicId)).toBe(1);
    expect(fetches).toBe(before + 2);

    // The daemon answers the reads, late: their banners serve the requests after them.
    for (const pending of unanswered.splice(0)) pending.answer(await fromDaemon(pending.publicId));
    await vi.advanceTimersByTimeAsync(0);
    const [served, reread] = await Promise.all([
      cache.variant(unserved.publicId, null),
      cache.variant(held.publicId, null),
    ]);
    expect(served?.identity.toString()).toContain(unserved.publicId);
    expect(reread?.identity.toString()).toContain(held.publicId);
    expect([served?.stale, reread?.stale]).toEqual([undefined, undefined]);
    expect(cache.retryAfterSeconds(unserved.publicId)).toBeUndefined();
    expect(fetches).toBe(before + 2);
  });

  it("warns at once and then once per 10 s while banners are served stale, naming how many, and says when the daemon answers again", async () => {
    const lines: Record<string, unknown>[] = [];
    const logged = new LoaderCache({
      revalidateMs: REVALIDATE_MS,
      now: () => now,
      logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
      fetchBanner: (publicId) => read(publicId),
    });
    read = fromDaemon;
    const [one, two] = await Promise.all([bannerFixture(service), bannerFixture(service)]);
    await logged.variant(one.publicId, null);
    await logged.variant(two.publicId, null);

    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    read = stalled;
    now += REVALIDATE_MS;
    const first = watched(logged.variant(one.publicId, null));
    await vi.advanceTimersByTimeAsync(HELD_READ_WAIT_MS);
    expect(first.value?.stale).toBe(true);
    const warning = {
      level: 40,
      msg: "the daemon could not be reached or has not answered: loaders are served as last read",
      cause: "[unavailable] the daemon has not answered a banner read within 2000 ms",
    };
    expect(lines).toMatchObject([{ ...warning, staleBanners: 1, failedSincePreviousLine: 0 }]);
    // The second banner within the interval: held back, told once the interval is over.
    const second = watched(logged.variant(two.publicId, null));
    await vi.advanceTimersByTimeAsync(HELD_READ_WAIT_MS);
    expect(second.value?.stale).toBe(true);
    expect(lines).toHaveLength(1);
    // Requests answered from the held copies meanwhile are no failed reads.
    await logged.variant(one.publicId, null);
    await vi.advanceTimersByTimeAsync(REPEATED_FAILURE_LOG_MS - HELD_READ_WAIT_MS);
    expect(lines.slice(1)).toMatchObject([
      { ...warning, staleBanners: 2, failedSincePreviousLine: 0 },
    ]);
    expect(lines).toHaveLength(2);

    // The daemon answers the first banner's read: an info line, the other still served stale.
    const answer = async (publicId: string) => {
      for (const pending of unanswered.filter((read) => read.publicId === publicId)) {
        pending.answer(await fromDaemon(publicId));
      }
      await vi.advanceTimersByTimeAsync(0);
    };
    await answer(one.publicId);
    const answered = {
      level: 30,
      msg: "the daemon answers again: loaders are served as it answers",
    };
    expect(lines.slice(2)).toMatchObject([
      { ...answered, staleBanners: 1, failedSincePreviousLine: 0 },
    ]);
    const readOne = await logged.variant(one.publicId, null);
    expect([readOne?.hash, readOne?.stale]).toEqual([first.value?.hash, undefined]);

    // Regression: it stops answering again within 10 s of the last warning, which was silent
    // until a read failed past them. Now told once those 10 s are over.
    now += REVALIDATE_MS;
    const third = watched(logged.variant(one.publicId, null));
    await vi.advanceTimersByTimeAsync(HELD_READ_WAIT_MS);
    expect(third.value?.stale).toBe(true);
    expect(lines).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(REPEATED_FAILURE_LOG_MS - HELD_READ_WAIT_MS);
    expect(lines.slice(3)).toMatchObject([
      { ...warning, staleBanners: 2, failedSincePreviousLine: 0 },
    ]);
    // Both answered: one info line for the outage, not one per banner.
    await answer(one.publicId);
    await answer(two.publicId);
    expect(lines.slice(4)).toMatchObject([
      { ...answered, staleBanners: 1, failedSincePreviousLine: 0 },
    ]);
    expect(lines).toHaveLength(5);
    const readTwo = await logged.variant(two.publicId, null);
    expect([readTwo?.hash, readTwo?.stale]).toEqual([second.value?.hash, undefined]);

    // An outage that begins and ends within 10 s of the last warning is told once they are
    // over, as the info line counting its failed read: never left out.
    now += REVALIDATE_MS;
    const fourth = watched(logged.variant(two.publicId, null));
    await vi.advanceTimersByTimeAsync(HELD_READ_WAIT_MS);
    expect(fourth.value?.stale).toBe(true);
    await answer(two.publicId);
    expect(lines).toHaveLength(5);
    await vi.advanceTimersByTimeAsync(REPEATED_FAILURE_LOG_MS);
    expect(lines.slice(5)).toEqual([
      expect.objectContaining({
        ...answered,
        staleBanners: 0,
        failedSincePreviousLine: 1,
        cause: warning.cause,
      }),
    ]);
  });
});
