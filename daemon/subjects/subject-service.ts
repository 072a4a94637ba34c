import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Authenticator, Authorized } from "#daemon/auth/authenticator.js";
import { activeBanner } from "#daemon/banners/active-banner.js";
import type { Clock } from "#daemon/clock.js";
import { DomainError, notFound } from "#daemon/errors.js";
import type { SubjectIdentity } from "#daemon/identity/subject-identity.js";
import { admission } from "#daemon/rpc/rate-limit-headers.js";
import { bodyOf } from "#daemon/rpc/request-body.js";
import type { Store } from "#daemon/store/store.js";
import {
  readStateWrite,
  readSubjectReference,
  recordExpiry,
  SUBJECT_BODY_LIMIT,
  type SubjectReference,
} from "#daemon/subjects/subject-rules.js";
import type { SubjectRecord } from "#daemon/subjects/subject-store.js";
import {
  DeleteSubjectStateRequestSchema,
  PutSubjectStateRequestSchema,
  ResolveSubjectRequestSchema,
  type SubjectService,
  type SubjectSnapshot,
  SubjectSnapshotSchema,
} from "#gen/consent/v1/subject_pb.js";

export interface SubjectServiceOptions {
  store: Store;
  authenticator: Authenticator;
  identity: SubjectIdentity;
  clock: Clock;
}

const bodyLimit = { maxBytes: SUBJECT_BODY_LIMIT, failure: "subject" } as const;

/** Typed gRPC fields in the shape of the REST body, so both meet the same rules. */
function typedReference(request: { bannerId: string; namespace?: string; subjectId: string }) {
  return { bannerId: request.bannerId, namespace: request.namespace, subjectId: request.subjectId };
}

/** The cross-device consent endpoints (spec 4.5-4.7, 3.2; decisions §4). */
export function createSubjectService(
  options: SubjectServiceOptions,
): ServiceImpl<typeof SubjectService> {
  const { store, authenticator, identity, clock } = options;

  /** The subject's hashes under every identity key, after checking its banner (404) and the key (503). */
  async function subjectHashes(
    auth: Authorized,
    reference: SubjectReference,
  ): Promise<{ hashes: string[]; bannerId: string }> {
    const banner = await activeBanner(store.banners, reference.bannerId, auth.team.id);
    const hashes = identity.hashes(
      auth.team.id,
      banner.id,
      reference.namespace,
      reference.subjectId,
    );
    return { hashes, bannerId: banner.id };
  }

  const admitted = admission(
    authenticator,
    { read: "consent:read", write: "consent:write" },
    { crossDevice: true },
  );

  return {
    resolveSubject: (request, ctx) =>
      admitted(ctx, false, async (auth) => {
        const reference = readSubjectReference(
          bodyOf(ResolveSubjectRequestSchema, request, typedReference, bodyLimit),
        );
        const { hashes } = await subjectHashes(auth, reference);
        const record = await store.subjects.find(hashes, clock());
        return record ? { found: true, snapshot: snapshotOf(record, request) } : { found: false };
      }),

    putSubjectState: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const body = bodyOf(
          PutSubjectStateRequestSchema,
          request,
          (r) => ({
            ...typedReference(r),
            baseVersion: r.baseVersion,
            consentState: r.consentState,
            expiresAt: r.expiresAt,
            protocolVersion: r.protocolVersion,
          }),
          bodyLimit,
        );
        const now = clock();
        const write = readStateWrite(body, now);
        const expiresAt = recordExpiry(write.expiresAt, now);
        const { hashes, bannerId } = await subjectHashes(auth, write);
        // A record found under an older identity key moves to the current key's hash as it is
        // written (decisions §4: the key can be rotated; README, "Privacy").
        const existing = await store.subjects.find(hashes, now);
        const next: SubjectRecord = {
          subjectHash: hashes[0] as string,
          teamId: auth.team.id,
          bannerId,
          consentState: write.consentState,
          protocolVersion: write.protocolVersion,
          version: write.baseVersion + 1,
          clientUpdatedAt: String(write.consentState.lastConsentTimestamp),
          updatedAt: now,
          expiresAt,
        };
        const result = await store.subjects.write(
          next,
          write.baseVersion,
          now,
          existing?.subjectHash,
        );
        if (result.outcome === "not_found")
          throw notFound("No consent state is stored for this subject");
        if (result.outcome === "conflict") {
          throw new DomainError(
            "conflict",
            "version_conflict",
            `baseVersion ${write.baseVersion} does not match the stored version ${result.current.version}`,
            { current: result.current },
          );
        }
        return { snapshot: snapshotOf(result.record, request) };
      }),

    deleteSubjectState: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const reference = readSubjectReference(
          bodyOf(DeleteSubjectStateRequestSchema, request, typedReference, bodyLimit),
        );
        const { hashes } = await subjectHashes(auth, reference);
        return { deleted: await store.subjects.delete(hashes, clock()) };
      }),
  };
}

/**
 * A stored record as the SubjectSnapshot message. A caller that asks for it (the gateway) gets the
 * state as JSON text (consent_state_json): it sends it on as it is, and neither side of a network
 * call encodes or decodes a google.protobuf.Struct (about 45 µs of CPU per call). Asked for, not
 * inferred from `json`: a caller built before the field existed still gets the Struct it reads.
 */
function snapshotOf(
  record: SubjectRecord,
  request: { consentStateAsJson: boolean },
): SubjectSnapshot {
  const state = request.consentStateAsJson
    ? { consentStateJson: Buffer.from(JSON.stringify(record.consentState)) }
    : { consentState: record.consentState };
  return create(SubjectSnapshotSchema, {
    ...state,
    protocolVersion: record.protocolVersion,
    version: record.version,
    clientUpdatedAt: record.clientUpdatedAt,
    updatedAt: timestampFromDate(record.updatedAt),
    expiresAt: timestampFromDate(record.expiresAt),
  });
}
