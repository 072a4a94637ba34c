import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ReactElement } from "react";
import { describe, expect, it } from "vitest";
import { terminalFrame } from "#cli/test-support/terminal-frame.js";
import { BannersTable } from "#cli/views/banner-views.js";
import { KeysTable } from "#cli/views/key-views.js";
import { LogPageView } from "#cli/views/log-views.js";
import { SessionsTable } from "#cli/views/session-views.js";
import { TeamsTable } from "#cli/views/team-views.js";
import { DeliveriesTable, WebhooksTable } from "#cli/views/webhook-views.js";
import { ApiKeySchema, SessionSchema, TeamSchema } from "#gen/consent/v1/admin_pb.js";
import { BannerSchema } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogEntrySchema } from "#gen/consent/v1/consent_log_pb.js";
import { DeliverySchema, WebhookSchema } from "#gen/consent/v1/webhook_pb.js";

/**
 * The narrowest terminal on which each list is a table rather than blocks, as cli/README.md
 * ("Output contract") gives them: free text longer than 10 columns (names, scopes, URLs, errors)
 * and the longest short values a column holds (a `professional` plan, a `revoked` key,
 * `accept_necessary`, a `succeeded` delivery).
 */
const id = "0f6a2b1c-9d8e-4f70-8a1b-2c3d4e5f6a7b";
const publicId = "5a147607-8673-4f5b-8305-71ebc1b37e18";
const time = timestampFromDate(new Date("2026-11-26T12:01:30Z"));
const LONG_TEXT = "Checkout integration of the shop";

async function narrowestTable(view: ReactElement): Promise<number> {
  for (let columns = 75; columns <= 250; columns++) {
    const [header = ""] = await terminalFrame(view, columns);
    // A table's first line is its headers, two spaces apart; a block's is a header and a value.
    if (/^(ID|RECEIVED) {2,}[A-Z][A-Z ]* {2,}[A-Z]/.test(header)) return columns;
  }
  throw new Error("no table up to 250 columns");
}

const key = (fields: { expiresAt?: typeof time }) =>
  create(ApiKeySchema, {
    id,
    environment: "live",
    name: LONG_TEXT,
    hint: "ck_live_…a1B2",
    scopes: ["banners:read", "banners:write", "consent:read", "consent:write"],
    revokedAt: time,
    ...fields,
  });

const logEntry = (method: string, preferences: Record<string, boolean>) =>
  create(ConsentLogEntrySchema, {
    bannerId: publicId,
    consentId: id,
    method,
    preferences,
    receivedAt: time,
  });

const delivery = (fields: Parameters<typeof create<typeof DeliverySchema>>[1]) =>
  create(DeliverySchema, {
    id: `dlv_01a21da9a2a47108b2765acb10774bd3_2c2dce3535f54cbcb2a3f8008593042f`,
    attempts: 3,
    createdAt: time,
    lastAttemptAt: time,
    ...fields,
  });

const webhook = (fields: Parameters<typeof create<typeof WebhookSchema>>[1]) =>
  create(WebhookSchema, {
    id,
    url: "https://crm.example.com/hooks/consent",
    eventTypes: ["consent.given"],
    bannerIds: [publicId],
    enabled: true,
    ...fields,
  });

describe("the terminal width each table needs", () => {
  it("teams, sessions, keys and banners", async () => {
    const team = create(TeamSchema, { id, name: LONG_TEXT, plan: "professional", createdAt: time });
    const session = create(SessionSchema, {
      id,
      createdAt: time,
      expiresAt: time,
      revokedAt: time,
    });
    const banner = create(BannerSchema, {
      id,
      publicId,
      name: LONG_TEXT,
      domain: "https://shop.example.com",
      revision: 2,
      hasUnpublishedChanges: true,
    });
    expect(await narrowestTable(<TeamsTable teams={[team]} />)).toBe(98);
    expect(await narrowestTable(<SessionsTable sessions={[session]} />)).toBe(89);
    expect(await narrowestTable(<KeysTable keys={[key({})]} />)).toBe(99);
    expect(await narrowestTable(<KeysTable keys={[key({ expiresAt: time })]} />)).toBe(112);
    expect(await narrowestTable(<BannersTable banners={[banner]} />)).toBe(120);
  });

  it("logs list, with and without --banner", async () => {
    const entries = [
      logEntry("accept_necessary", { necessary: true, analytics: false }),
      logEntry("consent_given", { necessary: true, analytics: true }),
    ];
    const page = { entries, nextPageToken: "" };
    expect(await narrowestTable(<LogPageView page={page} />)).toBe(135);
    expect(await narrowestTable(<LogPageView page={page} oneBanner />)).toBe(97);
  });

  it("webhooks list and deliveries", async () => {
    const list = async (fields: Parameters<typeof webhook>[0]) =>
      narrowestTable(<WebhooksTable webhooks={[webhook(fields)]} />);
    expect(await list({})).toBe(81);
    expect(await list({ failingSince: time })).toBe(108);
    expect(await list({ enabled: false, disabledReason: "the endpoint answered 410 Gone" })).toBe(
      94,
    );
    const fiveDays = "every attempt failed for 5 days (since 2026-11-21T12:00:00.000Z)";
    expect(await list({ enabled: false, disabledReason: fiveDays })).toBe(94);
    expect(
      await narrowestTable(
        <WebhooksTable
          webhooks={[
            webhook({ failingSince: time }),
            webhook({ enabled: false, disabledReason: fiveDays }),
          ]}
        />,
      ),
    ).toBe(120);
    const deliveries = async (fields: Parameters<typeof delivery>[0]) =>
      narrowestTable(
        <DeliveriesTable page={{ deliveries: [delivery(fields)], nextPageToken: "" }} />,
      );
    expect(await deliveries({ status: "succeeded", lastStatusCode: 200 })).toBe(150);
    expect(
      await deliveries({
        status: "pending",
        lastStatusCode: 503,
        nextAttemptAt: time,
        lastError: "the endpoint answered 503 Service Unavailable",
      }),
    ).toBe(169);
  });
});
