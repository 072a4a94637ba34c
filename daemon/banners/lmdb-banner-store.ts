import type { Database } from "lmdb";
import type { BannerRecord, BannerStore } from "#daemon/banners/banner-store.js";
import { prefixRange } from "#daemon/store/lmdb-keys.js";
import { DuplicateKeyError } from "#daemon/store/store.js";

/** Key of the per-team listing: `[teamId, createdAt in ms, id]`, so a forward scan is oldest first. */
type TeamBannerKey = [teamId: string, createdAtMs: number, id: string];

/**
 * The named databases of the banner store. A banner record carries its domain registration and
 * production environment, so one put stores all three (spec 4.3).
 */
export interface LmdbBannerDatabases {
  banners: Database<BannerRecord, string>;
  /** publicId → id; also enforces that publicId is unique. */
  bannerIdsByPublicId: Database<string, string>;
  /** [teamId, createdAtMs, id] → id. */
  bannerIdsByTeam: Database<string, TeamBannerKey>;
}

/** BannerStore over LMDB; conditional replaces read and write inside one write transaction. */
export function createLmdbBannerStore(dbs: LmdbBannerDatabases): BannerStore {
  const { banners, bannerIdsByPublicId, bannerIdsByTeam } = dbs;
  return {
    async insert(banner, maxPerTeam) {
      // The count and the insert in one write transaction, which LMDB serialises across
      // processes: racing inserts of one team see each other, and never pass the maximum.
      return banners.transaction(() => {
        // Checked before any write: lmdb does not roll back a callback that throws.
        if (maxPerTeam !== undefined) {
          const range = { ...prefixRange(banner.teamId, "ascending"), limit: maxPerTeam };
          if (bannerIdsByTeam.getKeysCount(range) >= maxPerTeam) return false;
        }
        if (banners.doesExist(banner.id)) throw new DuplicateKeyError("banner id");
        if (bannerIdsByPublicId.doesExist(banner.publicId)) {
          throw new DuplicateKeyError("publicId");
        }
        banners.putSync(banner.id, banner);
        bannerIdsByPublicId.putSync(banner.publicId, banner.id);
        bannerIdsByTeam.putSync([banner.teamId, banner.createdAt.getTime(), banner.id], banner.id);
        return true;
      });
    },
    async get(teamId, id) {
      const banner = banners.get(id);
      // Port: another team's banner is reported as absent.
      return banner?.teamId === teamId ? banner : null;
    },
    async getByPublicId(publicId) {
      const id = bannerIdsByPublicId.get(publicId);
      return id === undefined ? null : (banners.get(id) ?? null);
    },
    async listByTeam(teamId) {
      const range = bannerIdsByTeam.getRange(prefixRange(teamId, "ascending"));
      return Array.from(range, ({ value }) => banners.get(value)).filter((b) => b !== undefined);
    },
    async replace(next, expectedVersion) {
      if (next.version !== expectedVersion + 1) {
        throw new RangeError(`banner version ${next.version} does not follow ${expectedVersion}`);
      }
      // Port: under concurrent calls with the same expectedVersion exactly one succeeds. The
      // version check and the put share one write transaction, serialised across processes.
      return banners.transaction(() => {
        const stored = banners.get(next.id);
        if (stored?.version !== expectedVersion) return false;
        // The indexes hold identity fields; a replace that moved them would orphan entries.
        if (
          stored.publicId !== next.publicId ||
          stored.teamId !== next.teamId ||
          stored.createdAt.getTime() !== next.createdAt.getTime()
        ) {
          throw new RangeError("replace cannot change a banner's publicId, teamId or createdAt");
        }
        banners.putSync(next.id, next);
        return true;
      });
    },
  };
}
