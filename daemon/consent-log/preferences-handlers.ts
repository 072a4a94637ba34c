import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { activeBanner } from "#daemon/banners/active-banner.js";
import { acceptedServices, usOptOutChoices } from "#daemon/banners/category-signals.js";
import type { Clock } from "#daemon/clock.js";
import {
  compact,
  currentChoice,
  preferencesViewMessage,
} from "#daemon/consent-log/consent-log-messages.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import type { PreferenceLinks } from "#daemon/consent-log/preference-links.js";
import type { Store } from "#daemon/store/store.js";
import { appendConsentLog } from "#daemon/webhooks/outbox.js";
import type { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";

export interface PreferencesHandlerOptions {
  store: Store;
  clock: Clock;
  links: PreferenceLinks;
  /** The service's consentLogId generator, so its rows stay in one increasing order. */
  nextLogId: (receivedAt: Date) => Promise<string>;
  /** The per-IP limit of the page: the log route's figures, counted apart from it. */
  admitVisitor: (ctx: HandlerContext) => Promise<void>;
}

type PreferencesHandlers = Pick<
  ServiceImpl<typeof ConsentLogService>,
  "getPreferences" | "updatePreferences"
>;

/**
 * The preferences page behind managePreferences links (decisions §5): the signed token is the
 * credential, the newest row of its consentId on its banner is the current choice, and a change
 * is a new consent_changed row with that consentId.
 */
export function createPreferencesHandlers(options: PreferencesHandlerOptions): PreferencesHandlers {
  const { store, clock, links } = options;

  /** A link's grant, banner and current row; expired, altered and inactive all fail here. */
  async function granted(ctx: HandlerContext, token: string) {
    await options.admitVisitor(ctx);
    const grant = links.verify(token, clock());
    const banner = await activeBanner(store.banners, grant.publicId);
    // The link's banner's own newest row (decisions §5): another banner of the team may have
    // rows with the same visitor-made consentId, and neither its choice nor its context applies.
    const latest = await store.consentLog.latestByConsentId(
      banner.teamId,
      banner.id,
      grant.consentId,
    );
    return { grant, banner, latest };
  }

  return {
    async getPreferences(request, ctx) {
      const { grant, banner, latest } = await granted(ctx, request.token);
      return { view: preferencesViewMessage(banner, grant.consentId, latest, grant.expiresAt) };
    },

    async updatePreferences(request, ctx) {
      const { grant, banner, latest } = await granted(ctx, request.token);
      const receivedAt = clock();
      const preferences = currentChoice(banner, request.preferences);
      const accepted = Object.keys(preferences).filter((name) => preferences[name]);
      // The jurisdiction context of the choice being changed carries over; nothing about the
      // visitor is added (no page address: the page is ours, not the site's) but the privacy
      // signal the browser sent with the form. Where the choice changed had US opt-outs (a US
      // rule applied), the new one has them too, as the banner runtime derives them.
      const record: ConsentLogRecord = compact({
        id: await options.nextLogId(receivedAt),
        teamId: banner.teamId,
        bannerId: banner.id,
        publicId: banner.publicId,
        consentId: grant.consentId,
        method: "consent_changed",
        preferences,
        services: acceptedServices(banner.production.configuration.categories, accepted),
        revision: banner.production.revision,
        languageCode: latest?.languageCode,
        country: latest?.country,
        region: latest?.region,
        matchedRuleId: latest?.matchedRuleId,
        gpc: request.gpc,
        // sensitiveData and profiling, which no category stands for, carry over as they were.
        purposeChoices: latest?.purposeChoices && {
          ...latest.purposeChoices,
          ...usOptOutChoices(accepted),
        },
        occurredAt: receivedAt,
        timestampClamped: false,
        receivedAt,
      });
      // With its consent.given event for an explicit choice, in the same atomic write (spec 6).
      await appendConsentLog(store, record);
      return {
        consentLogId: record.id,
        view: preferencesViewMessage(banner, grant.consentId, record, grant.expiresAt),
      };
    },
  };
}
