import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { publishedBannerMessage } from "#daemon/banners/banner-messages.js";
import type { BannerRecord } from "#daemon/banners/banner-store.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { serviceNamesMessage } from "#daemon/consent-log/service-names.js";
import {
  type ConsentLogEntry,
  ConsentLogEntrySchema,
  type PreferencesView,
  PreferencesViewSchema,
} from "#gen/consent/v1/consent_log_pb.js";

/** Drops absent optional fields: a stored row has each optional field with a value or not at all. */
export function compact<T extends object>(value: T): T {
  // A loop over the keys, not Object.entries and fromEntries: a pair array per field cost a
  // log post about 2 µs.
  const kept: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key];
    // defineProperty for `__proto__`, which an assignment would take as the prototype.
    if (field === undefined) continue;
    if (key === "__proto__") Object.defineProperty(kept, key, { value: field, enumerable: true });
    else kept[key] = field;
  }
  return kept as T;
}

/** A stored row as the ConsentLogEntry message: the internal banner and team ids stay inside. */
export function consentLogEntryMessage(record: ConsentLogRecord): ConsentLogEntry {
  return create(ConsentLogEntrySchema, {
    consentLogId: record.id,
    bannerId: record.publicId,
    consentId: record.consentId,
    method: record.method,
    preferences: record.preferences,
    revision: record.revision,
    languageCode: record.languageCode,
    country: record.country,
    region: record.region,
    matchedRuleId: record.matchedRuleId,
    gpc: record.gpc,
    purposeChoices: record.purposeChoices,
    services: serviceNamesMessage(record.services),
    pageUrl: record.pageUrl,
    occurredAt: timestampFromDate(record.occurredAt),
    timestampClamped: record.timestampClamped,
    receivedAt: timestampFromDate(record.receivedAt),
  });
}

/**
 * The visitor's choice over the banner's production categories: required ones are always on,
 * others on only when the row accepted them. Categories the banner no longer offers drop out.
 */
export function currentChoice(
  banner: BannerRecord,
  accepted: Readonly<Record<string, boolean>>,
): Record<string, boolean> {
  return Object.fromEntries(
    banner.production.configuration.categories.map((category) => [
      category.name,
      category.required || accepted[category.name] === true,
    ]),
  );
}

/** What the preferences page shows (decisions §5). */
export function preferencesViewMessage(
  banner: BannerRecord,
  consentId: string,
  latest: ConsentLogRecord | null,
  expiresAt: Date,
): PreferencesView {
  return create(PreferencesViewSchema, {
    banner: publishedBannerMessage(banner),
    consentId,
    preferences: currentChoice(banner, latest?.preferences ?? {}),
    languageCode: latest?.languageCode ?? "",
    expiresAt: timestampFromDate(expiresAt),
    consentLogId: latest?.id ?? "",
  });
}
