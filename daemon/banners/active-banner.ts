import type { BannerRecord, BannerStore } from "#daemon/banners/banner-store.js";
import { notFound } from "#daemon/errors.js";

/**
 * The active banner with this public id, or 404 not_found (decisions §3: an inactive banner is
 * invisible to the public side). The id is a UUID, read in either case (RFC 9562). With a team, a banner of another team is equally not found, so a
 * key never learns that another tenant's banner exists.
 */
export async function activeBanner(
  banners: BannerStore,
  publicId: string,
  teamId?: string,
): Promise<BannerRecord> {
  const banner = await banners.getByPublicId(publicId.toLowerCase());
  if (!banner?.isActive || (teamId !== undefined && banner.teamId !== teamId)) {
    throw notFound(
      teamId === undefined
        ? "No active banner with that public Banner ID"
        : "No active banner with that public Banner ID on this team",
    );
  }
  return banner;
}
