import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ReactElement } from "react";
import { describe, expect, it } from "vitest";
import { terminalFrame } from "#cli/test-support/terminal-frame.js";
import { textWidth } from "#cli/text-width.js";
import { BannersTable } from "#cli/views/banner-views.js";
import { KeysTable } from "#cli/views/key-views.js";
import { LogPageView, renderTailLine } from "#cli/views/log-views.js";
import { SessionsTable } from "#cli/views/session-views.js";
import { TeamsTable } from "#cli/views/team-views.js";
import { DeliveriesTable, WebhooksTable } from "#cli/views/webhook-views.js";
import { ApiKeySchema, SessionSchema, TeamSchema } from "#gen/consent/v1/admin_pb.js";
import { BannerSchema } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogEntrySchema } from "#gen/consent/v1/consent_log_pb.js";
import { DeliverySchema, WebhookSchema } from "#gen/consent/v1/webhook_pb.js";

/**
 * The narrowest terminal on which each list is a table rather than blocks, measured and compared
 * with the figures cli/README.md ("Table widths") gives: free text longer than 10 columns (names,
 * scopes, URLs, errors) and the longest short values a column holds (a `professional` plan, a
 * `revoked` key, `accept_necessary`, a `succeeded` delivery).
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

/** The README's table of widths: `list` and `when` (if any) joined by ", ", to its figure. */
function documentedWidths(): Map<string, number> {
  const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const section = readme.split("\n## Table widths\n")[1]?.split("\n## ")[0] ?? "";
  const rows = section.matchAll(/^\| `([^`]+)` +\| +(\d+) +\|(.*)\|$/gm);
  return new Map(
    [...rows].map(([, list, columns, when = ""]) => [
      [list, when.trim()].filter(Boolean).join(", "),
      Number(columns),
    ]),
  );
}

const team = create(TeamSchema, { id, name: LONG_TEXT, plan: "professional", createdAt: time });
const session = create(SessionSchema, { id, createdAt: time, expiresAt: time, revokedAt: time });
const banner = create(BannerSchema, {
  id,
  publicId,
  name: LONG_TEXT,
  domain: "https://shop.example.com",
  revision: 2,
  hasUnpublishedChanges: true,
});
const logPage = {
  entries: [
    logEntry("accept_necessary", { necessary: true, analytics: false }),
    logEntry("consent_given", { necessary: true, analytics: true }),
  ],
  nextPageToken: "",
};
const failing = webhook({ failingSince: time });
const disabled = webhook({
  enabled: false,
  disabledReason: "every attempt failed for 5 days (since 2026-11-21T12:00:00.000Z)",
});
const deliveries = (fields: Parameters<typeof delivery>[0]) => (
  <DeliveriesTable page={{ deliveries: [delivery(fields)], nextPageToken: "" }} />
);

/** Each row of the README's table, as the view it measures. */
const LISTS: Record<string, ReactElement> = {
  "sessions list": <SessionsTable sessions={[session]} />,
  "teams list": <TeamsTable teams={[team]} />,
  "keys list": <KeysTable keys={[key({})]} />,
  "keys list, a key shows an expiry time": <KeysTable keys={[key({ expiresAt: time })]} />,
  "webhooks list": <WebhooksTable webhooks={[webhook({})]} />,
  "webhooks list, an endpoint is failing": <WebhooksTable webhooks={[failing]} />,
  "webhooks list, an endpoint is disabled (its reason in a REASON column)": (
    <WebhooksTable webhooks={[disabled]} />
  ),
  "webhooks list, one endpoint is failing and another disabled": (
    <WebhooksTable webhooks={[failing, disabled]} />
  ),
  "banners list": <BannersTable banners={[banner]} />,
  "logs list": <LogPageView page={logPage} />,
  "logs list --banner": <LogPageView page={logPage} oneBanner />,
  "webhooks deliveries": deliveries({ status: "succeeded", lastStatusCode: 200 }),
  "webhooks deliveries, a delivery shows its next attempt and an error": deliveries({
    status: "pending",
    lastStatusCode: 503,
    nextAttemptAt: time,
    lastError: "the endpoint answered 503 Service Unavailable",
  }),
};

describe("the terminal width each table needs, as cli/README.md gives it", () => {
  const documented = documentedWidths();

  it("documents every list measured here, and no other", () => {
    expect([...documented.keys()].sort()).toEqual(Object.keys(LISTS).sort());
  });

  for (const [name, view] of Object.entries(LISTS)) {
    it(name, async () => {
      expect(await narrowestTable(view)).toBe(documented.get(name));
    });
  }
});

// Regression: `logs tail` printed 133-column lines at any width, BANNER included with --banner.
describe("logs tail, laid out by the widths of logs list", () => {
  const documented = documentedWidths();
  const [necessary] = logPage.entries;

  for (const [list, oneBanner] of [
    ["logs list", false],
    ["logs list --banner", true],
  ] as const) {
    it(`is a table from ${list}'s width, and one block per row below it`, () => {
      const width = documented.get(list) ?? 0;
      const at = (columns: number) => ({ color: false, columns, oneBanner });
      const header = renderTailLine(undefined, at(width));
      const row = renderTailLine(necessary, at(width));
      expect(header).toMatch(/^RECEIVED {2,}METHOD {2,}/);
      expect(header.includes("BANNER")).toBe(!oneBanner);
      for (const line of [header, row])
        expect(textWidth(line.trimEnd())).toBeLessThanOrEqual(width);
      expect(row).toContain("accept_necessary  ");
      // A column narrower: no header, and each row a block with a blank line after it.
      expect(renderTailLine(undefined, at(width - 1))).toBe("");
      const block = renderTailLine(necessary, at(width - 1));
      expect(block).toMatch(/^RECEIVED {4}2026-11-26 12:01:30Z\n/);
      expect(block).toMatch(/\nACCEPTED {4}necessary\n\n$/);
      expect(block.includes("BANNER")).toBe(!oneBanner);
    });
  }
});
