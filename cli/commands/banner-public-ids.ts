import type { DaemonClient } from "#cli/daemon-client.js";
import { UserError } from "#cli/problems.js";

/**
 * Checks public banner ids given to `option` (`--banner`, `--banners`) against the team's
 * banners, in one listing. A banner's own id, the one `banners` commands take, has the same form
 * as its public id, so only the listing tells the slip apart: it is refused naming the public id
 * to give instead. Returns the values the team has no banner with (by either id), for the caller
 * to refuse in its own terms.
 */
export async function checkPublicBannerIds(
  client: DaemonClient,
  team: string,
  values: readonly string[],
  option: string,
  /** Abandons the listing (a stream's Ctrl-C). */
  signal?: AbortSignal,
): Promise<string[]> {
  const { banners } = await client.banners(team).listBanners({}, { signal });
  const unknown: string[] = [];
  for (const value of values) {
    const wanted = value.toLowerCase();
    if (banners.some(({ publicId }) => publicId === wanted)) continue;
    const named = banners.find(({ id }) => id === wanted);
    if (named) {
      throw new UserError(
        `${value} is the id of banner "${named.name}"; ${option} takes its public id, ${named.publicId}.`,
        undefined,
        "invalid_argument",
      );
    }
    unknown.push(value);
  }
  return unknown;
}
