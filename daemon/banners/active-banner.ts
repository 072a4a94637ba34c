import type { BannerRecord, BannerStore } from "#daemon/banners/banner-store.js";
import { notFound } from "#daemon/errors.js";

/**
 * The active banner with this public id, or 404 not_found (decisions §3: an inactive banner is
 * invisible to the public side). The id is a UUID, read in either case (RFC 9562). With a team, a banner of another team is equally not found, so a
 * key never learns that another tenant's banner exists; the id of one of the team's own banners,
 * given instead (both are UUIDs, and the subject endpoints' bannerId is the public one), is named
 * as such in the 404, as the banner routes name a public id given for an id, and said to be
 * inactive when it is.
 */
export async function activeBanner(
  banners: BannerStore,
  publicId: string,
  teamId?: string,
): Promise<BannerRecord> {
  const id = publicId.toLowerCase();
  const banner = await banners.getByPublicId(id);
  if (banner?.isActive && (teamId === undefined || banner.teamId === teamId)) return banner;
  if (teamId === undefined) throw notFound("No active banner with that public Banner ID");
  const byId = banner ? null : await banners.get(teamId, id);
  if (!byId) throw notFound("No active banner with that public Banner ID on this team");
  // An inactive banner's public Banner ID gets the same 404 (decisions §3): say so, rather than
  // send the caller to an id that answers as this one did.
  const inactive = byId.isActive
    ? ""
    : ", and that banner is inactive: its subject endpoints answer 404 until it is made active again";
  // The banner's name stays out: a key may call the subject routes without banners:read.
  throw notFound(
    `No active banner with that public Banner ID on this team: ${byId.id} is a banner's id, whose public Banner ID is ${byId.publicId}${inactive}`,
  );
}
