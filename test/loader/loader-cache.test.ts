import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoaderCache } from "#gateway/loader/loader-cache.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { http } from "#test/support/api.js";
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
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    cache = new LoaderCache({
      revalidateMs: 30_000,
      now: () => now,
      async fetchBanner(publicId) {
        fetches++;
        return (
          (await banners.getPublishedBanner({ publicId }).catch(() => ({ banner: null }))).banner ??
          null
        );
      },
    });
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

    await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { layout: "modal" } },
    });
    await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
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
});
