import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Client, Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { LoaderCache } from "#gateway/loader/loader-cache.js";
import { STALE_IF_ERROR_MS, STALE_RETRY_MS } from "#gateway/loader/stale-if-error.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { http, publishConfiguration } from "#test/support/api.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

const REVALIDATE_MS = 30_000;
/** The cache's bound on banners remembered as failed: the product's 10,000 made small. */
const MAX_FAILED_READS = 200;
/** How long a test waits for a read started in the background. */
const WAIT = { timeout: 5_000, interval: 20 };

/**
 * Stale-if-error (stale-if-error.ts): a banner whose read fails because the daemon cannot be
 * reached is served as last read, with the daemon asked again at most every STALE_RETRY_MS, for
 * up to STALE_IF_ERROR_MS after the last successful read; against a real daemon that is stopped
 * and started again on the same data directory, the clock injected.
 */
describe("LoaderCache while its daemon cannot be reached", () => {
  let dataDir: string;
  let service: TestService;
  let banners: Client<typeof BannerService>;
  let now = 0;
  let fetches = 0;
  let cache: LoaderCache;
  /** Served before the outage: one to outlive the bound, one to see the daemon come back. */
  let outliving: Awaited<ReturnType<typeof bannerFixture>>;
  let recovering: Awaited<ReturnType<typeof bannerFixture>>;
  let deactivated: Awaited<ReturnType<typeof bannerFixture>>;

  const start = async () => {
    service = await startTestService({ gateway: true, dataDir });
    banners = createClient(BannerService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  };
  const failureOf = (publicId: string) =>
    cache.variant(publicId, null).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error).code,
    );

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-loader-stale-"));
    await start();
    cache = new LoaderCache({
      revalidateMs: REVALIDATE_MS,
      now: () => now,
      maxFailedReads: MAX_FAILED_READS,
      async fetchBanner(publicId) {
        fetches++;
        try {
          return (await banners.getPublishedBanner({ publicId })).banner ?? null;
        } catch (error) {
          if (ConnectError.from(error).code === Code.NotFound) return null;
          throw error;
        }
      },
    });
    [outliving, recovering, deactivated] = await Promise.all([
      bannerFixture(service),
      bannerFixture(service),
      bannerFixture(service),
    ]);
  });
  afterAll(async () => {
    await service.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("serves what it last served, reads again at most every 5 s, and answers the failure past a day", async () => {
    const readAt = now;
    const first = await cache.variant(outliving.publicId, null);
    expect(first?.stale).toBeUndefined();
    await cache.variant(recovering.publicId, null);
    await cache.variant(deactivated.publicId, null);
    const kept = cache.keptBytes;
    await service.close();

    now += REVALIDATE_MS;
    const before = fetches;
    const stale = await cache.variant(outliving.publicId, null);
    expect(stale).toMatchObject({ stale: true, hash: first?.hash, identity: first?.identity });
    expect(fetches).toBe(before + 1);
    // Within the retry interval, every request is answered from memory.
    const many = await Promise.all(
      Array.from({ length: 20 }, () => cache.variant(outliving.publicId, null)),
    );
    expect(many.every((v) => v?.stale && v.hash === first?.hash)).toBe(true);
    now += STALE_RETRY_MS - 1;
    await cache.variant(outliving.publicId, null);
    expect(fetches).toBe(before + 1);
    // Then one read for all the requests that come while it is in flight, answered meanwhile.
    now += 1;
    const during = await Promise.all(
      Array.from({ length: 20 }, () => cache.variant(outliving.publicId, null)),
    );
    expect(during.every((v) => v?.stale && v.hash === first?.hash)).toBe(true);
    expect(fetches).toBe(before + 2);

    // A banner this cache never served has nothing to serve: the failure, as without the rule.
    expect(await failureOf(crypto.randomUUID())).toBe(Code.Unavailable);

    // Up to a day after the last successful read, never past it.
    now = readAt + STALE_IF_ERROR_MS - 1;
    expect((await cache.variant(outliving.publicId, null))?.stale).toBe(true);
    now = readAt + STALE_IF_ERROR_MS;
    expect(await failureOf(outliving.publicId)).toBe(Code.Unavailable);
    expect(cache.keptBytes).toBeLessThan(kept);
    expect(await failureOf(outliving.publicId)).toBe(Code.Unavailable);
  });

  it("serves the daemon's answer at the first read after it is back: a publish, or a banner gone", async () => {
    // The other two were last read a day ago: read afresh first, then served stale.
    await start();
    now += 1;
    const before = await cache.variant(recovering.publicId, null);
    expect(before?.stale).toBeUndefined();
    await cache.variant(deactivated.publicId, null);
    await service.close();
    now += REVALIDATE_MS;
    expect((await cache.variant(recovering.publicId, null))?.stale).toBe(true);
    expect((await cache.variant(deactivated.publicId, null))?.stale).toBe(true);

    await start();
    const { key, id } = recovering;
    await publishConfiguration(service, key, id, { layout: "modal" });
    const off = await http(service, "PATCH", `/api/v1/banners/${deactivated.id}`, {
      key: deactivated.key,
      body: { isActive: false },
    });
    expect(off.status).toBe(200);
    // Not yet due: still what was last read.
    expect((await cache.variant(recovering.publicId, null))?.hash).toBe(before?.hash);

    now += STALE_RETRY_MS;
    // The request that starts the read is answered at once; the read serves the ones after it.
    await vi.waitFor(async () => {
      const served = await cache.variant(recovering.publicId, null);
      expect(served?.stale).toBeUndefined();
      expect(served?.identity.toString()).toContain('"layout":"modal"');
    }, WAIT);
    // An inactive banner's answer is never stale-served: 404 (null) from its first read on.
    await vi.waitFor(async () => {
      expect(await cache.variant(deactivated.publicId, null)).toBeNull();
    }, WAIT);
    expect(await cache.variant(deactivated.publicId, null)).toBeNull();
  });

  it("answers a banner it never served the failure for 5 s without asking the daemon, then asks once", async () => {
    const unserved = await bannerFixture(service);
    const madeUp = crypto.randomUUID();
    await service.close();

    const before = fetches;
    const concurrent = await Promise.all(
      Array.from({ length: 20 }, () => failureOf(unserved.publicId)),
    );
    expect(concurrent).toEqual(Array(20).fill(Code.Unavailable));
    expect(fetches).toBe(before + 1);
    // Until the next read is due, every request gets the failure without a call, and a retry
    // asked for in the whole seconds left until then.
    for (let i = 0; i < 20; i++) expect(await failureOf(unserved.publicId)).toBe(Code.Unavailable);
    expect(cache.retryAfterSeconds(unserved.publicId)).toBe(STALE_RETRY_MS / 1_000);
    now += 1_500;
    expect(cache.retryAfterSeconds(unserved.publicId)).toBe(4);
    now += STALE_RETRY_MS - 1_501;
    expect(await failureOf(unserved.publicId)).toBe(Code.Unavailable);
    expect(cache.retryAfterSeconds(unserved.publicId)).toBe(1);
    expect(fetches).toBe(before + 1);
    now += 1;
    expect(await failureOf(unserved.publicId)).toBe(Code.Unavailable);
    expect(fetches).toBe(before + 2);
    // Per banner: another id is read on its own first request.
    expect(await failureOf(madeUp)).toBe(Code.Unavailable);
    expect(fetches).toBe(before + 3);
    // A change heard of (invalidate) is read on the next request.
    cache.invalidate(unserved.publicId);
    expect(await failureOf(unserved.publicId)).toBe(Code.Unavailable);
    expect(fetches).toBe(before + 4);

    // Ids made up by the hundred keep at most maxFailedReads failures: the least recent leave.
    const oldest = crypto.randomUUID();
    const ids = [
      oldest,
      ...Array.from({ length: MAX_FAILED_READS - 1 }, () => crypto.randomUUID()),
    ];
    for (let i = 0; i < ids.length; i += 50) {
      await Promise.all(ids.slice(i, i + 50).map((id) => failureOf(id)));
    }
    expect(fetches).toBe(before + 4 + MAX_FAILED_READS);
    expect(await failureOf(oldest)).toBe(Code.Unavailable);
    expect(fetches).toBe(before + 4 + MAX_FAILED_READS);
    // The banner failed least recently is read again on its request, within 5 s of its failure.
    expect(await failureOf(madeUp)).toBe(Code.Unavailable);
    expect(fetches).toBe(before + 5 + MAX_FAILED_READS);

    // The daemon back: a failure is answered until its next read is due, then the daemon's answer,
    // an unknown id's 404 (null) remembered as before.
    await start();
    expect(await failureOf(madeUp)).toBe(Code.Unavailable);
    now += STALE_RETRY_MS;
    const served = await cache.variant(unserved.publicId, null);
    expect(served?.identity.toString()).toContain(unserved.publicId);
    expect(served?.stale).toBeUndefined();
    expect(cache.retryAfterSeconds(unserved.publicId)).toBeUndefined();
    expect(await cache.variant(madeUp, null)).toBeNull();
    const answered = fetches;
    expect(await cache.variant(madeUp, null)).toBeNull();
    expect(fetches).toBe(answered);
  });
});
