import { create, equals } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type {
  BannerRecord,
  BannerConfiguration as StoredConfiguration,
} from "#daemon/banners/banner-store.js";
import {
  type Banner,
  type BannerConfiguration,
  BannerConfigurationSchema,
  BannerSchema,
  type PublishedBanner,
  PublishedBannerSchema,
} from "#gen/consent/v1/banner_pb.js";

/** The stored configuration as its proto message (field names are the same by design). */
export function configurationMessage(configuration: StoredConfiguration): BannerConfiguration {
  return create(BannerConfigurationSchema, configuration);
}

/** decisions §6: the loader's address, `{CONSENT_BASE_URL}/loader/{publicId}.js`. */
export function loaderUrl(baseUrl: string, publicId: string): string {
  return `${baseUrl.replace(/\/+$/, "")}/loader/${publicId}.js`;
}

/**
 * A banner record as the Banner message (spec 2.1 plus decisions §3), with its loader address on
 * the daemon's public base URL, so an operator's tools print the address visitors reach.
 */
export function bannerMessage(record: BannerRecord, baseUrl: string): Banner {
  const draft = configurationMessage(record.draft);
  const production = configurationMessage(record.production.configuration);
  return create(BannerSchema, {
    id: record.id,
    publicId: record.publicId,
    teamId: record.teamId,
    name: record.name,
    domain: record.domain,
    isActive: record.isActive,
    configuration: draft,
    compliance: record.compliance,
    createdAt: timestampFromDate(record.createdAt),
    updatedAt: timestampFromDate(record.updatedAt),
    revision: record.production.revision,
    publishedAt: timestampFromDate(record.production.publishedAt),
    // Compared as messages: a field the stored side predates (a text added to BannerTexts later)
    // equals its default, so re-sending unchanged texts shows no unpublished change.
    hasUnpublishedChanges: !equals(BannerConfigurationSchema, draft, production),
    loaderUrl: loaderUrl(baseUrl, record.publicId),
  });
}

/** The production side of a banner, as the loader and the log route see it. */
export function publishedBannerMessage(record: BannerRecord): PublishedBanner {
  return create(PublishedBannerSchema, {
    publicId: record.publicId,
    domain: record.domain,
    revision: record.production.revision,
    configuration: configurationMessage(record.production.configuration),
    compliance: record.compliance,
    publishedAt: timestampFromDate(record.production.publishedAt),
  });
}
