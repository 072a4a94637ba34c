import { toJson } from "@bufbuild/protobuf";
import { type Timestamp, timestampDate } from "@bufbuild/protobuf/wkt";
import { type Banner, BannerConfigurationSchema } from "#gen/consent/v1/banner_pb.js";
import type { SubjectSnapshot } from "#gen/consent/v1/subject_pb.js";

/** ISO 8601 with milliseconds, as every timestamp of the REST API is written. */
export function isoTime(timestamp: Timestamp | undefined): string | undefined {
  return timestamp ? timestampDate(timestamp).toISOString() : undefined;
}

/** UTF-8 bytes as text, without copying them first. */
export function utf8(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString();
}

/** spec 2.3: a snapshot without `found`, its state sent as a Struct (typed callers, a conflict's `current`). */
export function snapshotJson(snapshot: SubjectSnapshot): Record<string, unknown> {
  return { consentState: snapshot.consentState ?? {}, ...snapshotFields(snapshot) };
}

/** spec 2.3: the members of a snapshot that follow `consentState`. */
export function snapshotFields(snapshot: SubjectSnapshot): Record<string, unknown> {
  return {
    protocolVersion: snapshot.protocolVersion,
    version: snapshot.version,
    clientUpdatedAt: snapshot.clientUpdatedAt,
    updatedAt: isoTime(snapshot.updatedAt),
    expiresAt: isoTime(snapshot.expiresAt),
  };
}

/** spec 2.1 Banner shape plus decisions §3 (publicId, revision, publication state). */
export function bannerJson(banner: Banner): Record<string, unknown> {
  return {
    id: banner.id,
    publicId: banner.publicId,
    name: banner.name,
    domain: banner.domain,
    isActive: banner.isActive,
    configuration: banner.configuration
      ? toJson(BannerConfigurationSchema, banner.configuration, { alwaysEmitImplicit: true })
      : {},
    compliance: {
      gdpr: banner.compliance?.gdpr ?? false,
      ccpa: banner.compliance?.ccpa ?? false,
      lgpd: banner.compliance?.lgpd ?? false,
    },
    createdAt: isoTime(banner.createdAt),
    updatedAt: isoTime(banner.updatedAt),
    revision: banner.revision,
    publishedAt: isoTime(banner.publishedAt),
    hasUnpublishedChanges: banner.hasUnpublishedChanges,
  };
}
