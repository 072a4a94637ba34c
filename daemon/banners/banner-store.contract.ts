import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { BannerConfiguration, BannerRecord } from "#daemon/banners/banner-store.js";
import { DuplicateKeyError } from "#daemon/store/store.js";
import {
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";

/** A configuration with every kind of field set (the banner unit tests use it too). */
export const configuration: BannerConfiguration = {
  layout: "banner",
  position: "bottom",
  primaryColor: "#111827",
  secondaryColor: "#ffffff",
  textColor: "#111827",
  accentColor: "#2563eb",
  categories: [
    { name: "necessary", required: true, label: "Necessary", description: "", services: [] },
    { name: "analytics", required: false, label: "Analytics", description: "", services: ["ga"] },
  ],
  texts: {
    en: {
      title: "Cookies",
      description: "We use cookies.",
      acceptAll: "Accept all",
      rejectAll: "Reject all",
      customize: "Customize",
      save: "Save",
      privacyPolicyUrl: "https://example.com/privacy",
      categories: { analytics: { label: "Analytics", description: "Usage statistics" } },
    },
  },
  jurisdictionRules: [{ id: "eu", countries: ["DE", "FR"], regions: [], mode: "opt_in" }],
  telemetryLevel: "origin",
  additionalDomains: ["https://shop.example.com"],
};

/** A banner of `teamId` created and first published at `createdAt`, version 1. */
export function aBanner(teamId: string, createdAt: Date, overrides: Partial<BannerRecord> = {}) {
  const banner: BannerRecord = {
    id: randomUUID(),
    publicId: `pb_${randomUUID()}`,
    teamId,
    name: "Main site",
    domain: "https://example.com",
    isActive: true,
    compliance: { gdpr: true, ccpa: false, lgpd: false },
    draft: configuration,
    production: { revision: 1, configuration, publishedAt: createdAt },
    createdAt,
    updatedAt: createdAt,
    version: 1,
    ...overrides,
  };
  return banner;
}

/** The BannerStore promises (daemon/banners/banner-store.ts), for any adapter. */
export function describeBannerStoreContract(openStore: OpenStore): void {
  describe("BannerStore contract", () => {
    const store = useFreshStore(openStore);
    const now = new Date();
    const teamId = randomUUID();

    it("returns an inserted banner with its production environment, by id and by publicId", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      const found = await store().banners.get(teamId, banner.id);
      expect(found).toEqual(banner);
      expect(found?.production.publishedAt).toBeInstanceOf(Date);
      expect(await store().banners.getByPublicId(banner.publicId)).toEqual(banner);
    });

    it("reports another team's banner as absent", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      expect(await store().banners.get(randomUUID(), banner.id)).toBeNull();
      expect(await store().banners.get(teamId, randomUUID())).toBeNull();
      expect(await store().banners.getByPublicId("pb_unknown")).toBeNull();
    });

    it("rejects a second banner with the same publicId or id, storing nothing of it", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      const samePublicId = aBanner(teamId, now, { publicId: banner.publicId });
      await expect(store().banners.insert(samePublicId)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store().banners.get(teamId, samePublicId.id)).toBeNull();
      const sameId = aBanner(teamId, now, { id: banner.id });
      await expect(store().banners.insert(sameId)).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store().banners.getByPublicId(sameId.publicId)).toBeNull();
      expect(await store().banners.listByTeam(teamId)).toEqual([banner]);
    });

    it("lists a team's banners oldest first, and only that team's", async () => {
      const banners = [aBanner(teamId, shifted(now, MINUTE)), aBanner(teamId, now)];
      for (const banner of banners) await store().banners.insert(banner);
      await store().banners.insert(aBanner(randomUUID(), now));
      expect(await store().banners.listByTeam(teamId)).toEqual([banners[1], banners[0]]);
    });

    it("refuses a banner beyond the team's maximum, however many inserts race", async () => {
      const max = 5;
      const racing = Array.from({ length: 20 }, (_, i) => aBanner(teamId, shifted(now, i)));
      const results = await Promise.all(
        racing.map((banner) => store().banners.insert(banner, max)),
      );
      expect(results.filter(Boolean)).toHaveLength(max);
      const accepted = racing.filter((_, i) => results[i]);
      expect(await store().banners.listByTeam(teamId)).toEqual(accepted);
      // A refused banner left nothing behind, by id or by public id.
      for (const [i, banner] of racing.entries()) {
        const stored = results[i] ? banner : null;
        expect(await store().banners.get(teamId, banner.id)).toEqual(stored);
        expect(await store().banners.getByPublicId(banner.publicId)).toEqual(stored);
      }
      const late = aBanner(teamId, shifted(now, MINUTE));
      expect(await store().banners.insert(late, max)).toBe(false);
      expect(await store().banners.getByPublicId(late.publicId)).toBeNull();
      // Another team has a maximum of its own.
      const other = randomUUID();
      const others = Array.from({ length: max }, (_, i) => aBanner(other, shifted(now, i)));
      const more = await Promise.all(others.map((banner) => store().banners.insert(banner, max)));
      expect(more.every(Boolean)).toBe(true);
      expect(await store().banners.listByTeam(other)).toEqual(others);
      // Without a maximum nothing is counted; with one, such a banner counts as any other.
      expect(await store().banners.insert(late)).toBe(true);
      expect(await store().banners.listByTeam(teamId)).toHaveLength(max + 1);
      expect(await store().banners.insert(aBanner(teamId, now), max + 1)).toBe(false);
    });

    it("counts banners stored without a maximum, and replaced ones, against it", async () => {
      // Two stored under a maximum, one without (as before there was one); one of them replaced.
      const earlier = Array.from({ length: 3 }, (_, i) => aBanner(teamId, shifted(now, i)));
      for (const [i, banner] of earlier.entries()) {
        expect(await store().banners.insert(banner, i < 2 ? 5 : undefined)).toBe(true);
      }
      const [first] = earlier as [BannerRecord];
      const renamed = { ...first, name: "Renamed", version: 2, updatedAt: shifted(now, MINUTE) };
      expect(await store().banners.replace(renamed, 1)).toBe(true);
      const racing = await Promise.all(
        Array.from({ length: 6 }, () => store().banners.insert(aBanner(teamId, now), 5)),
      );
      expect(racing.filter(Boolean)).toHaveLength(2);
      expect(await store().banners.listByTeam(teamId)).toHaveLength(5);
      expect(await store().banners.get(teamId, first.id)).toEqual(renamed);
    });

    it("replaces a banner whose stored version is the expected one", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      const next = { ...banner, name: "Renamed", version: 2, updatedAt: shifted(now, MINUTE) };
      expect(await store().banners.replace(next, 1)).toBe(true);
      expect(await store().banners.get(teamId, banner.id)).toEqual(next);
    });

    it("refuses a replace with a stale version and keeps the stored banner", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      await store().banners.replace({ ...banner, name: "Second", version: 2 }, 1);
      expect(await store().banners.replace({ ...banner, name: "Stale", version: 2 }, 1)).toBe(
        false,
      );
      expect((await store().banners.get(teamId, banner.id))?.name).toBe("Second");
    });

    it("throws on a replace that would move a banner's publicId, team or creation time", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      for (const moved of [
        { publicId: `pb_${randomUUID()}` },
        { teamId: randomUUID() },
        { createdAt: shifted(now, MINUTE) },
      ]) {
        const next = { ...banner, ...moved, name: "Moved", version: 2 };
        await expect(store().banners.replace(next, 1)).rejects.toBeInstanceOf(RangeError);
      }
      expect(await store().banners.get(teamId, banner.id)).toEqual(banner);
      expect(await store().banners.getByPublicId(banner.publicId)).toEqual(banner);
    });

    it("refuses to replace a banner that does not exist", async () => {
      const ghost = aBanner(teamId, now, { version: 2 });
      expect(await store().banners.replace(ghost, 1)).toBe(false);
      expect(await store().banners.get(teamId, ghost.id)).toBeNull();
    });

    it("lets exactly one of 20 concurrent replaces with the same expected version succeed", async () => {
      const banner = aBanner(teamId, now);
      await store().banners.insert(banner);
      const attempts = Array.from({ length: 20 }, (_, i) => ({
        ...banner,
        name: `Attempt ${i}`,
        version: 2,
      }));
      const results = await Promise.all(attempts.map((next) => store().banners.replace(next, 1)));
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = attempts[results.indexOf(true)];
      expect(await store().banners.get(teamId, banner.id)).toEqual(winner);
    });
  });
}
