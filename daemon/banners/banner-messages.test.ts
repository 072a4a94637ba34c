import { describe, expect, it } from "vitest";
import { defaultConfiguration } from "#daemon/banners/banner-configuration.js";
import { bannerMessage } from "#daemon/banners/banner-messages.js";
import { configuration } from "#daemon/banners/banner-store.contract.js";
import type {
  BannerConfiguration,
  BannerRecord,
  BannerTexts,
} from "#daemon/banners/banner-store.js";

const BASE_URL = "https://consent.example.net/";

function record(draft: BannerConfiguration, published: BannerConfiguration): BannerRecord {
  const at = new Date("2026-11-24T12:00:00.000Z");
  return {
    id: "banner-1",
    publicId: "5f0c6a55-8f8e-4a4c-9c43-1d2b3c4d5e6f",
    teamId: "team-1",
    name: "Shop",
    domain: "shop.example.com",
    isActive: true,
    draft,
    production: { revision: 1, configuration: published, publishedAt: at },
    compliance: { gdpr: true, ccpa: false, lgpd: false },
    createdAt: at,
    updatedAt: at,
    version: 1,
  };
}

describe("hasUnpublishedChanges", () => {
  it("is false when the draft differs from what was published only by a text the stored side predates", () => {
    // Published before BannerTexts had alwaysOnLabel; the same texts sent again carry it empty.
    const { alwaysOnLabel: _, ...texts } = configuration.texts.en as BannerTexts;
    const published = { ...configuration, texts: { en: texts } };
    const draft = { ...configuration, texts: { en: { ...texts, alwaysOnLabel: "" } } };
    expect(bannerMessage(record(draft, published), BASE_URL).hasUnpublishedChanges).toBe(false);
  });

  it("is true once a draft's value differs", () => {
    const draft = defaultConfiguration();
    draft.primaryColor = "#123456";
    expect(
      bannerMessage(record(draft, defaultConfiguration()), BASE_URL).hasUnpublishedChanges,
    ).toBe(true);
  });

  it("carries the loader's address on the daemon's public base URL", () => {
    const message = bannerMessage(record(defaultConfiguration(), defaultConfiguration()), BASE_URL);
    expect(message.loaderUrl).toBe(
      "https://consent.example.net/loader/5f0c6a55-8f8e-4a4c-9c43-1d2b3c4d5e6f.js",
    );
  });
});
