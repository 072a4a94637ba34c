import { setTimeout as sleep } from "node:timers/promises";
import { constants } from "node:zlib";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoaderCache } from "#gateway/loader/loader-cache.js";
import type { LoaderVariant } from "#gateway/loader/loader-response.js";
import type { Geo } from "#gateway/loader/runtime-config.js";
import { BannerService, type PublishedBanner } from "#gen/consent/v1/banner_pb.js";
import { http, publishConfiguration } from "#test/support/api.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * decisions §6 with several gateways: a gateway that is not told of a publish (split mode, or a
 * publish through another gateway) revalidates against the real daemon after its TTL.
 */
describe("LoaderCache against a daemon it hears nothing from", () => {
  let service: TestService;
  let now = 0;
  let fetches = 0;
  let cache: LoaderCache;
  let fetchBanner: (publicId: string) => Promise<PublishedBanner | null>;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    fetchBanner = async (publicId) => {
      fetches++;
      return (
        (await banners.getPublishedBanner({ publicId }).catch(() => ({ banner: null }))).banner ??
        null
      );
    };
    cache = new LoaderCache({ revalidateMs: 30_000, now: () => now, fetchBanner });
  });
  afterAll(() => service.close());

  it("serves from memory within the TTL, then picks up a publish", async () => {
    const { key, id, publicId } = await bannerFixture(service);
    const first = await cache.variant(publicId, null);
    const [again] = await Promise.all([
      cache.variant(publicId, null),
      cache.variant(publicId, null),
    ]);
    expect(again).toBe(first);
    expect(fetches).toBe(1);

    await publishConfiguration(service, key, id, { layout: "modal" });
    expect(await cache.variant(publicId, null)).toBe(first);
    now += 30_000;
    const republished = await cache.variant(publicId, null);
    expect(republished?.hash).not.toBe(first?.hash);
    expect(republished?.identity.toString()).toContain('"layout":"modal"');
  });

  it("keeps the compressed bodies of an unchanged banner, and forgets a deactivated one", async () => {
    const { key, id, publicId } = await bannerFixture(service);
    const first = await cache.variant(publicId, null);
    now += 30_000;
    expect(await cache.variant(publicId, null)).toBe(first);
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    now += 30_000;
    expect(await cache.variant(publicId, null)).toBeNull();
  });

  it("re-reads a banner at once on invalidate, keeping its bodies when production is unchanged", async () => {
    const { key, id, publicId } = await bannerFixture(service);
    const first = await cache.variant(publicId, null);
    const before = fetches;
    // A draft edit: the daemon is asked again, the compressed bodies stay.
    await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { layout: "modal" } },
    });
    cache.invalidate(publicId);
    expect(await cache.variant(publicId, null)).toBe(first);
    expect(fetches).toBe(before + 1);
    await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    cache.invalidate(publicId);
    const published = await cache.variant(publicId, null);
    expect(published?.identity.toString()).toContain('"layout":"modal"');
    expect(fetches).toBe(before + 2);
  });

  it("re-reads a banner at once on invalidate, even with a daemon answer in flight", async () => {
    const { key, id, publicId } = await bannerFixture(service);
    const inFlight = cache.variant(publicId, null);
    await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    cache.invalidate(publicId);
    const fresh = await cache.variant(publicId, null);
    expect(fresh?.identity.toString()).toContain('"revision":2');
    await inFlight; // whatever it read, it must not replace the fresher answer
    expect(await cache.variant(publicId, null)).toBe(fresh);
  });

  it("remembers an inactive banner as missing for the TTL, and serves it again once re-activated", async () => {
    const { key, id, publicId } = await bannerFixture(service);
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    const before = fetches;
    expect(await cache.variant(publicId, null)).toBeNull();
    expect(await cache.variant(publicId, null)).toBeNull();
    expect(fetches).toBe(before + 1);

    // Re-activated elsewhere: picked up after the TTL.
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: true } });
    expect(await cache.variant(publicId, null)).toBeNull();
    now += 30_000;
    expect((await cache.variant(publicId, null))?.identity.toString()).toContain(publicId);

    // Switched off and on through this gateway: invalidate forgets the miss at once.
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    cache.invalidate(publicId);
    expect(await cache.variant(publicId, null)).toBeNull();
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: true } });
    cache.invalidate(publicId);
    expect(await cache.variant(publicId, null)).not.toBeNull();
  });

  it("keeps a live banner's bodies beside unknown ids, each asked of the daemon once per TTL", async () => {
    const { publicId } = await bannerFixture(service);
    const first = await cache.variant(publicId, null);
    const unknown = Array.from({ length: 50 }, () => crypto.randomUUID());
    for (const publicId of unknown) expect(await cache.variant(publicId, null)).toBeNull();
    const before = fetches;
    expect(await cache.variant(publicId, null)).toBe(first);
    for (const publicId of unknown) expect(await cache.variant(publicId, null)).toBeNull();
    expect(fetches).toBe(before);
  });

  describe("with a bound on the bytes kept", () => {
    const bytesOf = (variant: LoaderVariant | null) =>
      variant ? variant.identity.length + variant.br.length + variant.gzip.length : 0;
    /** `count` locations by country: AA, AB, … */
    const places = (count: number): Geo[] =>
      Array.from({ length: count }, (_, i) => ({
        country: String.fromCharCode(65 + Math.floor(i / 26), 65 + (i % 26)),
      }));
    /** A cache bounded to `maxBytes`. */
    const budgeted = (maxBytes: number) =>
      new LoaderCache({ revalidateMs: 30_000, now: () => now, fetchBanner, maxBytes });

    it("drops the least recently used banners beyond it, serving the recent ones from memory", async () => {
      const publicIds = await Promise.all(
        Array.from({ length: 6 }, async () => (await bannerFixture(service)).publicId),
      );
      const size = bytesOf(
        await budgeted(Number.POSITIVE_INFINITY).variant(publicIds[0] as string, null),
      );
      // Room for three responses (the banners' differ by a few bytes at most).
      const cache = budgeted(3.5 * size);
      const request = (i: number) => cache.variant(publicIds[i] as string, null);
      const served: (LoaderVariant | null)[] = [];
      for (const publicId of publicIds) {
        served.push(await cache.variant(publicId, null));
        expect(cache.keptBytes).toBeLessThanOrEqual(3.5 * size);
      }
      expect(cache.keptBytes).toBe(served.slice(3).reduce((sum, v) => sum + bytesOf(v), 0));

      const before = fetches;
      // Used again, the oldest of the three kept becomes the most recent.
      expect(await request(3)).toBe(served[3]);
      expect(await request(4)).toBe(served[4]);
      expect(await request(5)).toBe(served[5]);
      expect(fetches).toBe(before);
      const evicted = await request(0);
      expect(evicted?.hash).toBe(served[0]?.hash);
      expect(fetches).toBe(before + 1);
      // Banner 3 was the least recently used: it left to make room for banner 0.
      expect(await request(4)).toBe(served[4]);
      expect(await request(5)).toBe(served[5]);
      expect(fetches).toBe(before + 1);
      expect(await request(3)).not.toBe(served[3]);
      expect(fetches).toBe(before + 2);
      expect(cache.keptBytes).toBeLessThanOrEqual(3.5 * size);
    });

    it("keeps the banner just served even when its response alone exceeds the bound", async () => {
      const [first, second] = await Promise.all([bannerFixture(service), bannerFixture(service)]);
      const cache = budgeted(1);
      await cache.variant(first.publicId, null);
      const served = await cache.variant(second.publicId, null);
      expect(cache.keptBytes).toBe(bytesOf(served));
      const before = fetches;
      expect(await cache.variant(second.publicId, null)).toBe(served);
      expect(fetches).toBe(before);
    });

    it("drops the least recently served location beyond 300, counting nothing for it after", async () => {
      const { publicId } = await bannerFixture(service, {
        configuration: { jurisdictionRules: [{ id: "everyone", mode: "notice" }] },
      });
      const cache = budgeted(Number.POSITIVE_INFINITY);
      const [dropped, ...others] = places(302);
      const first = await cache.variant(publicId, dropped as Geo);
      const firstBr = first?.br;
      // Asked again: queued for recompression, which ends after it was dropped.
      await cache.variant(publicId, dropped as Geo);
      const kept = await Promise.all(
        others.slice(0, 300).map((geo) => cache.variant(publicId, geo)),
      );
      expect(new Set(kept.map((v) => v?.hash)).size).toBe(300);
      // Served again, the oldest of the others stays and the next leaves in its place.
      expect(await cache.variant(publicId, others[0] as Geo)).toBe(kept[0]);
      kept.splice(1, 1, await cache.variant(publicId, others[300] as Geo));
      expect(await cache.variant(publicId, others[0] as Geo)).toBe(kept[0]);
      // Queued behind the dropped one's recompression: once it is done, so is the other.
      const last = kept[kept.length - 1] as LoaderVariant;
      await cache.variant(publicId, others[299] as Geo);
      while (last.brotliQuality < constants.BROTLI_MAX_QUALITY) await sleep(20);
      expect(cache.keptBytes).toBe(kept.reduce((sum, v) => sum + bytesOf(v), 0));
      // Dropped while queued: its body is as first built.
      expect(first?.br).toBe(firstBr);
      expect(first?.brotliQuality).toBeLessThan(constants.BROTLI_MAX_QUALITY);
      expect(await cache.variant(publicId, dropped as Geo)).not.toBe(first);
    });

    it("counts each response while kept, and nothing once its banner is gone or replaced", async () => {
      const { key, id, publicId } = await bannerFixture(service, {
        configuration: { jurisdictionRules: [{ id: "eu", countries: ["DE"], mode: "opt_in" }] },
      });
      const cache = budgeted(Number.POSITIVE_INFINITY);
      const de = await cache.variant(publicId, { country: "DE" });
      const fr = await cache.variant(publicId, { country: "FR" });
      expect(cache.keptBytes).toBe(bytesOf(de) + bytesOf(fr));

      // Re-read with production unchanged (a draft edit): the same responses, counted once.
      await http(service, "PATCH", `/api/v1/banners/${id}`, {
        key,
        body: { configuration: { layout: "modal" } },
      });
      cache.invalidate(publicId);
      expect(await cache.variant(publicId, { country: "DE" })).toBe(de);
      now += 30_000;
      expect(await cache.variant(publicId, { country: "FR" })).toBe(fr);
      expect(cache.keptBytes).toBe(bytesOf(de) + bytesOf(fr));

      // Published: the previous responses leave the count.
      await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
      cache.invalidate(publicId);
      const published = await cache.variant(publicId, { country: "DE" });
      expect(published?.hash).not.toBe(de?.hash);
      expect(cache.keptBytes).toBe(bytesOf(published));

      // Locations no rule matches share the response of no location: counted once.
      const nowhere = await cache.variant(publicId, null);
      const unmatched = await Promise.all(
        places(300).map((geo) => cache.variant(publicId, { ...geo, region: `${geo.country}-1` })),
      );
      expect(unmatched.filter((v) => v !== nowhere && v?.hash !== published?.hash)).toEqual([]);
      expect(cache.keptBytes).toBe(bytesOf(published) + bytesOf(nowhere));

      // Deactivated: nothing is kept.
      await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
      cache.invalidate(publicId);
      expect(await cache.variant(publicId, null)).toBeNull();
      expect(cache.keptBytes).toBe(0);
    });
  });
});
