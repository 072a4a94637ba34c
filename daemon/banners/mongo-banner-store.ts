import type { Collection, IndexDescription, WithId } from "mongodb";
import type { BannerRecord, BannerStore, Compliance } from "#daemon/banners/banner-store.js";
import { cancellableRead } from "#daemon/store/mongo-cancellation.js";
import {
  duplicateKeyError,
  insertUnderTeamMaximum,
  isDuplicateKey,
  READ_LATEST,
  refusedReplace,
} from "#daemon/store/mongo-writes.js";
import type { ReadCancellation } from "#daemon/store/store.js";

/**
 * A banner as stored in MongoDB: ONE document holds the banner, its domain registration and its
 * production environment, so creating all three is a single-document write, atomic without a
 * transaction (spec 4.3). `_id` is the internal banner id. `slot` is the place an insert under
 * the team's maximum took (insertUnderTeamMaximum); a banner created before there was one has
 * none. It is the store's alone: toBanner leaves it out of the record.
 */
export type BannerDocument = Omit<BannerRecord, "id"> & { _id: string; slot?: number };

/** What insertUnderTeamMaximum names: banners in its errors, and the index of their slots. */
const BANNER_SLOTS = { what: "banner", slotIndex: "banners_slot" } as const;

/** BannerStore over the `banners` collection. */
export class MongoBannerStore implements BannerStore {
  static readonly indexes: IndexDescription[] = [
    // The loader, the log route and the subject endpoints find a banner by its public id.
    { key: { publicId: 1 }, name: "banners_public_id", unique: true },
    { key: { teamId: 1, createdAt: 1, _id: 1 }, name: "banners_by_team" },
    // One banner per slot of a team: racing inserts under a maximum cannot share a slot.
    {
      key: { teamId: 1, slot: 1 },
      name: BANNER_SLOTS.slotIndex,
      unique: true,
      partialFilterExpression: { slot: { $exists: true } },
    },
  ];

  constructor(private readonly collection: Collection<BannerDocument>) {}

  /** Under a maximum, the insert takes a free slot of its team (insertUnderTeamMaximum). */
  async insert(banner: BannerRecord, maxPerTeam?: number): Promise<boolean> {
    return insertUnderTeamMaximum(this.collection, toDocument(banner), maxPerTeam, BANNER_SLOTS);
  }

  async get(teamId: string, id: string): Promise<BannerRecord | null> {
    // Both fields in the filter: another team's banner is absent, not forbidden (tenant isolation).
    const document = await this.collection.findOne({ _id: id, teamId });
    return document && toBanner(document);
  }

  async getByPublicId(publicId: string): Promise<BannerRecord | null> {
    const document = await this.collection.findOne({ publicId });
    return document && toBanner(document);
  }

  async listByTeam(teamId: string, cancel?: ReadCancellation): Promise<BannerRecord[]> {
    const documents = await cancellableRead(cancel, (options) =>
      this.collection.find({ teamId }, options).sort({ createdAt: 1, _id: 1 }).toArray(),
    );
    return documents.map(toBanner);
  }

  async replace(next: BannerRecord, expectedVersion: number): Promise<boolean> {
    if (next.version !== expectedVersion + 1) {
      throw new RangeError(`banner version ${next.version} must be expectedVersion + 1`);
    }
    const { _id, ...replacement } = toDocument(next);
    // The replacement keeps the banner's slot: a slot free again while its banner still counts
    // could let racing inserts pass the team's maximum. A slot never changes once taken, so
    // reading it first races with nothing. A whole-document replacement rather than $set, so the
    // configuration's keys (category names may hold a '.') never meet update-operator field-name
    // rules, as in mongo-subject-store.ts.
    const stored = await this.collection.findOne(
      { _id },
      { ...READ_LATEST, projection: { _id: 0, slot: 1 } },
    );
    const kept = stored?.slot === undefined ? replacement : { ...replacement, slot: stored.slot };
    try {
      // The version in the filter makes this a compare-and-swap: of concurrent replaces with the
      // same expectedVersion the server applies one; the others match nothing.
      // The identity fields in the filter too: a replace never moves them (the port's promise).
      const { matchedCount } = await this.collection.replaceOne(
        {
          _id,
          teamId: next.teamId,
          publicId: next.publicId,
          createdAt: next.createdAt,
          version: expectedVersion,
        },
        kept,
      );
      if (matchedCount === 1) return true;
      return refusedReplace(
        this.collection,
        _id,
        expectedVersion,
        "a banner's publicId, teamId or createdAt",
      );
    } catch (error) {
      if (isDuplicateKey(error)) throw duplicateKeyError(error, "banner");
      throw error;
    }
  }
}

function toDocument(banner: BannerRecord): BannerDocument {
  return {
    _id: banner.id,
    publicId: banner.publicId,
    teamId: banner.teamId,
    name: banner.name,
    domain: banner.domain,
    isActive: banner.isActive,
    compliance: copyCompliance(banner.compliance),
    draft: banner.draft,
    production: {
      revision: banner.production.revision,
      configuration: banner.production.configuration,
      publishedAt: banner.production.publishedAt,
    },
    createdAt: banner.createdAt,
    updatedAt: banner.updatedAt,
    version: banner.version,
  };
}

/** Nested configurations come straight from BSON deserialisation, so they are fresh objects. */
function toBanner(document: WithId<BannerDocument>): BannerRecord {
  return {
    id: document._id,
    publicId: document.publicId,
    teamId: document.teamId,
    name: document.name,
    domain: document.domain,
    isActive: document.isActive,
    compliance: copyCompliance(document.compliance),
    draft: document.draft,
    production: {
      revision: document.production.revision,
      configuration: document.production.configuration,
      publishedAt: document.production.publishedAt,
    },
    createdAt: document.createdAt,
    updatedAt: document.updatedAt,
    version: document.version,
  };
}

function copyCompliance(compliance: Compliance): Compliance {
  return { gdpr: compliance.gdpr, ccpa: compliance.ccpa, lgpd: compliance.lgpd };
}
