import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { setTimeout as sleep } from "node:timers/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { constants } from "node:zlib";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RECOMPRESSION_CHANNEL } from "#gateway/loader/brotli-upgrades.js";
import { LoaderCache } from "#gateway/loader/loader-cache.js";
import type { LoaderVariant } from "#gateway/loader/loader-response.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { http, publishConfiguration } from "#test/support/api.js";
import { bannerFixture } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

// A collection on demand, to see which responses anything still holds.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

/** A banner with a response per country (a rule for everyone). */
const byCountry = { configuration: { jurisdictionRules: [{ id: "everyone", mode: "notice" }] } };
const countries = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({
    country: String.fromCharCode(65 + Math.floor((from + i) / 26), 65 + ((from + i) % 26)),
  }));

/**
 * decisions §6 (docs/banner-runtime.md, "What a gateway process keeps"): a response queued for
 * recompression holds no memory of its own, and one the cache no longer keeps when its turn
 * comes costs no compression.
 */
describe("LoaderCache's background recompression", () => {
  let service: TestService;
  let cache: LoaderCache;
  /** The digests of the responses recompressed, as each started (RECOMPRESSION_CHANNEL). */
  const recompressed: string[] = [];
  const onRecompression = (message: unknown) =>
    recompressed.push((message as { hash: string }).hash);
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    const banners = createClient(
      BannerService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    cache = new LoaderCache({
      revalidateMs: 30_000,
      async fetchBanner(publicId) {
        try {
          return (await banners.getPublishedBanner({ publicId })).banner ?? null;
        } catch (error) {
          if (error instanceof ConnectError && error.code === Code.NotFound) return null;
          throw error;
        }
      },
    });
    subscribe(RECOMPRESSION_CHANNEL, onRecompression);
  });
  afterAll(async () => {
    unsubscribe(RECOMPRESSION_CHANNEL, onRecompression);
    cache.close();
    await service.close();
  });

  /**
   * Six locations of a banner kept, asked for twice: about a second of recompression queued
   * ahead (some 40 ms each, and a rest three times as long).
   */
  async function queueAhead(): Promise<LoaderVariant[]> {
    const { publicId } = await bannerFixture(service, byCountry);
    const ahead: LoaderVariant[] = [];
    for (const geo of countries(0, 6))
      ahead.push((await cache.variant(publicId, geo)) as LoaderVariant);
    for (const geo of countries(0, 6)) await cache.variant(publicId, geo);
    return ahead;
  }

  /**
   * Ten locations of a banner asked for twice, queued behind `ahead`; weak references to their
   * responses and their digests, the test holding nothing else of them.
   */
  async function queueBehind(publicId: string) {
    const held: WeakRef<LoaderVariant>[] = [];
    const hashes = new Set<string>();
    for (const geo of countries(100, 10)) {
      const built = (await cache.variant(publicId, geo)) as LoaderVariant;
      held.push(new WeakRef(built));
      hashes.add(built.hash);
    }
    for (const geo of countries(100, 10)) await cache.variant(publicId, geo);
    return { held, hashes };
  }

  /** The responses still in memory after a full collection, out of the turn that made them. */
  async function stillHeld(held: WeakRef<LoaderVariant>[]): Promise<number> {
    await sleep(0);
    collectGarbage();
    return held.filter((ref) => ref.deref() !== undefined).length;
  }

  /** Waits until the responses queued ahead are recompressed, the queue then empty. */
  async function queueDone(ahead: LoaderVariant[]): Promise<void> {
    while (ahead.some((v) => v.brotliQuality < constants.BROTLI_MAX_QUALITY)) await sleep(20);
    await sleep(300);
  }

  it("holds nothing of a banner's queued responses once it is switched off, and compresses none", async () => {
    const ahead = await queueAhead();
    const { key, id, publicId } = await bannerFixture(service, byCountry);
    const { held, hashes } = await queueBehind(publicId);
    await http(service, "PATCH", `/api/v1/banners/${id}`, { key, body: { isActive: false } });
    cache.invalidate(publicId);
    expect(await cache.variant(publicId, null)).toBeNull();
    // Still queued behind the other banner's, which are not yet all done.
    expect(ahead.some((v) => v.brotliQuality < constants.BROTLI_MAX_QUALITY)).toBe(true);
    expect(await stillHeld(held)).toBe(0);

    await queueDone(ahead);
    expect(recompressed.filter((hash) => hashes.has(hash))).toEqual([]);
    expect(ahead.every((v) => recompressed.includes(v.hash))).toBe(true);
  });

  it("holds nothing of queued responses their banner's publish replaced, and compresses none", async () => {
    const ahead = await queueAhead();
    const { key, id, publicId } = await bannerFixture(service, byCountry);
    const { held, hashes } = await queueBehind(publicId);
    await publishConfiguration(service, key, id, { layout: "modal" });
    cache.invalidate(publicId);
    // The same locations asked for once each: built anew, not queued.
    const rebuilt: LoaderVariant[] = [];
    for (const geo of countries(100, 10))
      rebuilt.push((await cache.variant(publicId, geo)) as LoaderVariant);
    expect(rebuilt.filter((v) => hashes.has(v.hash))).toEqual([]);
    expect(ahead.some((v) => v.brotliQuality < constants.BROTLI_MAX_QUALITY)).toBe(true);
    expect(await stillHeld(held)).toBe(0);

    await queueDone(ahead);
    expect(recompressed.filter((hash) => hashes.has(hash))).toEqual([]);
    // Asked for once since they were built: served as built.
    expect(rebuilt.filter((v) => recompressed.includes(v.hash))).toEqual([]);
  });
});
