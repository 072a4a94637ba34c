import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { render } from "ink-testing-library";
import type { ReactElement } from "react";
import { describe, expect, it } from "vitest";
import { jsonText, printable } from "#cli/format.js";
import { terminalFrame } from "#cli/test-support/terminal-frame.js";
import { textWidth } from "#cli/text-width.js";
import { BackupView } from "#cli/views/backup-views.js";
import { BannersTable, BannerView } from "#cli/views/banner-views.js";
import { KeysTable, keyStatus, MintedKeyView } from "#cli/views/key-views.js";
import { SubjectView } from "#cli/views/subject-views.js";
import { TeamsTable } from "#cli/views/team-views.js";
import { DeliveriesTable, WebhooksTable, WebhookView } from "#cli/views/webhook-views.js";
import { ApiKeySchema, TeamSchema } from "#gen/consent/v1/admin_pb.js";
import { BannerSchema } from "#gen/consent/v1/banner_pb.js";
import { ResolveSubjectResponseSchema } from "#gen/consent/v1/subject_pb.js";
import { DeliverySchema, WebhookSchema } from "#gen/consent/v1/webhook_pb.js";

const HOUR = 3600_000;
const at = (ms: number) => timestampFromDate(new Date(ms));

describe("keyStatus", () => {
  const now = new Date("2026-06-01T00:00:00Z");
  const key = (fields: Parameters<typeof create<typeof ApiKeySchema>>[1]) =>
    create(ApiKeySchema, fields);

  it("reads revoked before expired before active", () => {
    expect(keyStatus(key({}), now).label).toBe("active");
    expect(keyStatus(key({ expiresAt: at(now.getTime() + HOUR) }), now).label).toBe("active");
    expect(keyStatus(key({ expiresAt: at(now.getTime() - HOUR) }), now).label).toBe("expired");
    expect(
      keyStatus(
        key({ expiresAt: at(now.getTime() - HOUR), revokedAt: at(now.getTime() - 2 * HOUR) }),
        now,
      ).label,
    ).toBe("revoked");
  });

  // Regression: with this machine's clock behind the daemon's, a revoked key and a key rotated
  // with no grace period read as active until the clock reached the times the daemon recorded.
  it("reads revoked and no-grace rotated keys as stopped, whatever this machine's clock", () => {
    const later = now.getTime() + HOUR;
    expect(keyStatus(key({ revokedAt: at(later) }), now).label).toBe("revoked");
    const rotated = (graceMs: number) =>
      keyStatus(
        key({ replacedBy: "new-id", replacedAt: at(later), expiresAt: at(later + graceMs) }),
        now,
      ).label;
    expect(rotated(0)).toBe("expired");
    expect(rotated(HOUR)).toBe("active");
  });
});

describe("MintedKeyView", () => {
  it("shows the secret once and what became of the rotated key", () => {
    const previous = create(ApiKeySchema, {
      id: "old-id",
      hint: "ck_live_…a1B2",
      expiresAt: at(Date.now() + 24 * HOUR),
    });
    const minted = {
      apiKey: create(ApiKeySchema, { id: "new-id", scopes: ["banners:read"] }),
      secret: "ck_live_SECRET",
      previous,
    };
    const frame = render(<MintedKeyView minted={minted} />).lastFrame() ?? "";
    expect(frame.match(/ck_live_SECRET/g)).toHaveLength(1);
    expect(frame).toContain("It will not be shown again");
    expect(frame).toMatch(/The previous key ck_live_…a1B2 \(old-id\) keeps working until \d{4}-/);
  });

  // Regression: on a terminal as wide as the note up to the time's space, Ink broke the time there.
  it("breaks the note on the rotated key before its time, never inside it", async () => {
    const previous = create(ApiKeySchema, {
      id: "old-id",
      hint: "ck_live_…a1B2",
      expiresAt: timestampFromDate(new Date("2999-01-01T00:00:00Z")),
    });
    const minted = {
      apiKey: create(ApiKeySchema, { id: "new-id" }),
      secret: "ck_live_S",
      previous,
    };
    const upToSpace = "The previous key ck_live_…a1B2 (old-id) keeps working until 2999-01-01";
    const lines = await terminalFrame(<MintedKeyView minted={minted} />, textWidth(upToSpace));
    expect(lines.slice(-2)).toEqual([
      "The previous key ck_live_…a1B2 (old-id) keeps working until",
      "2999-01-01 00:00:00Z.",
    ]);
  });
});

/** A banner as the daemon answers it: one published revision behind its draft. */
const aBanner = create(BannerSchema, {
  id: "0f6a2b1c-9d8e-4f70-8a1b-2c3d4e5f6a7b",
  publicId: "5a147607-8673-4f5b-8305-71ebc1b37e18",
  name: "A banner with a long name that gives way first",
  domain: "https://example.com",
  isActive: true,
  revision: 2,
  hasUnpublishedChanges: true,
  compliance: { gdpr: true, ccpa: false, lgpd: true },
});

describe("BannerView", () => {
  it("prints the loader snippet whole, on its own line", () => {
    const banner = aBanner;
    const frame =
      render(<BannerView banner={banner} baseUrl="http://localhost:8080" />).lastFrame() ?? "";
    expect(frame.split("\n")).toContain(
      '<script src="http://localhost:8080/loader/5a147607-8673-4f5b-8305-71ebc1b37e18.js"></script>',
    );
    expect(frame).toContain("GDPR, LGPD");
    expect(frame).toContain("has unpublished changes");
  });

  // Regression: at 80 columns the snippet (92 characters with any base URL) came out as two
  // lines, `…-71ebc1b37e18.` and `js"></script>`, which no page can use as pasted.
  it("prints the loader snippet whole on one line on a terminal narrower than it", async () => {
    const snippet =
      '<script src="https://consent.example.org/loader/5a147607-8673-4f5b-8305-71ebc1b37e18.js"></script>';
    for (const columns of [80, 40]) {
      const lines = await terminalFrame(
        <BannerView banner={aBanner} baseUrl="https://consent.example.org" />,
        columns,
      );
      expect(lines.slice(-2)).toEqual(["Loader snippet:", snippet]);
    }
  });

  // Regression: at 40 columns `banners show` split `published 2026-11-29` / `07:43:09Z`.
  it("wraps before a time rather than inside it", async () => {
    const published = create(BannerSchema, {
      ...aBanner,
      publishedAt: at(Date.parse("2026-11-29T07:43:09Z")),
    });
    const lines = await terminalFrame(
      <BannerView banner={published} baseUrl="https://consent.example.org" />,
      40,
    );
    const revision = lines.findIndex((line) => line.startsWith("Revision:"));
    expect(lines.slice(revision, revision + 2)).toEqual([
      "Revision: 2, published",
      "          2026-11-29 07:43:09Z",
    ]);
  });
});

describe("KeysTable", () => {
  // Regression: at 40 columns the SCOPES block broke `…,webhooks:wri` / `te`.
  it("wraps a list of scopes at its commas, never inside a scope", async () => {
    const scopes = [
      "banners:read",
      "banners:write",
      "consent:read",
      "consent:write",
      "webhooks:read",
      "webhooks:write",
    ];
    const key = create(ApiKeySchema, {
      id: "0f6a2b1c-9d8e-4f70-8a1b-2c3d4e5f6a7b",
      environment: "live",
      name: "ci",
      hint: "ck_live_…a1B2",
      scopes,
    });
    const lines = await terminalFrame(<KeysTable keys={[key]} />, 40);
    const first = lines.findIndex((line) => line.startsWith("SCOPES:"));
    expect(lines.slice(first, first + 3)).toEqual([
      "SCOPES: banners:read,banners:write,",
      "        consent:read,consent:write,",
      "        webhooks:read,webhooks:write",
    ]);
  });
});

describe("WebhookView", () => {
  it("prints the secret and a URL wider than the terminal whole, each on a line of its own", async () => {
    const url = "https://hooks.example.com/consent/receiver/with/a/rather/long/path?team=acme";
    const webhook = create(WebhookSchema, {
      id: "31aa44d0-7d88-4b1d-8ab5-2fddfc5055fd",
      url,
      secret: `whsec_${"c2VjcmV0".repeat(6)}`,
      eventTypes: ["consent.given"],
      enabled: true,
    });
    const lines = await terminalFrame(<WebhookView webhook={webhook} />, 60);
    expect(lines).toContain(webhook.secret);
    expect(lines.slice(lines.indexOf("URL:"), lines.indexOf("URL:") + 2)).toEqual(["URL:", url]);
  });
});

describe("DeliveriesTable", () => {
  it("puts a page token that does not fit after its words whole at the start of the next line", async () => {
    const token = "eyJjcmVhdGVkQXQiOiIyMDI2LTExLTI2VDEyOjAxOjMwWiIsImlkIjoiMTQ4In0";
    const page = {
      deliveries: [create(DeliverySchema, { id: "d-1", status: "pending" })],
      nextPageToken: token,
    };
    const wide = await terminalFrame(<DeliveriesTable page={page} />, 120);
    expect(wide.at(-1)).toBe(`more deliveries: add --page-token ${token}`);
    const narrow = await terminalFrame(<DeliveriesTable page={page} />, 60);
    expect(narrow.slice(-2)).toEqual(["more deliveries: add --page-token", token]);
  });
});

describe("BannersTable", () => {
  it("keeps both ids whole: the public id is what --banner takes", () => {
    const frame = render(<BannersTable banners={[aBanner]} />).lastFrame() ?? "";
    expect(frame).toContain("0f6a2b1c-9d8e-4f70-8a1b-2c3d4e5f6a7b");
    expect(frame).toContain("5a147607-8673-4f5b-8305-71ebc1b37e18");
  });
});

describe("stored text on a terminal", () => {
  it("writes control and bidirectional characters as escapes, and doubles a backslash", () => {
    expect(printable("a\u001b[2Jb\u007f\u009b\u202etxt.exe\\x1b")).toBe(
      "a\\x1b[2Jb\\x7f\\x9b\\u202etxt.exe\\\\x1b",
    );
    const json = jsonText({ name: "ads\u009d0;owned\u009c", dir: "\u2067x" }, 2);
    expect(json).not.toMatch(/[\u007f-\u009f\u2067]/);
    expect(JSON.parse(json)).toEqual({ name: "ads\u009d0;owned\u009c", dir: "\u2067x" });
  });

  it("shows a subject's stored state without raw control characters", () => {
    const result = create(ResolveSubjectResponseSchema, {
      found: true,
      snapshot: {
        consentState: { categories: ["ads\u009d0;owned\u009c", "x\u007f"] },
        version: 1,
        protocolVersion: 2,
      },
    });
    const frame = render(<SubjectView result={result} />).lastFrame() ?? "";
    expect(frame.replaceAll("\n", "")).not.toMatch(/\p{Cc}/u);
    expect(frame).toContain("ads\\u009d0;owned\\u009c");
  });
});

describe("SubjectView", () => {
  const clientTime = (clientUpdatedAt: string) => {
    const result = create(ResolveSubjectResponseSchema, {
      found: true,
      snapshot: { consentState: {}, version: 1, protocolVersion: 1, clientUpdatedAt },
    });
    const frame = render(<SubjectView result={result} />).lastFrame() ?? "";
    return /^Client time\s+(.*)$/m.exec(frame)?.[1];
  };

  it("shows the client time in UTC to the second, and one it cannot read as written", () => {
    expect(clientTime("2026-11-21T12:00:00.999999999+02:00")).toBe("2026-11-21 10:00:00Z");
    expect(clientTime("2026-11-21t23:30:05-01:00")).toBe("2026-11-22 00:30:05Z");
    expect(clientTime("2026-11-21T10:00:05Z")).toBe("2026-11-21 10:00:05Z");
    // Not a date-time of the daemon's rules (no zone, an impossible day): as the client wrote it.
    expect(clientTime("2026-11-21 10:00")).toBe("2026-11-21 10:00");
    expect(clientTime("2027-02-30T10:00:00Z")).toBe("2027-02-30T10:00:00Z");
    expect(clientTime("")).toBe("-");
  });
});

describe("BackupView", () => {
  it("lists each file and how to restore, and warns when the identity key stayed behind", () => {
    const { lastFrame } = render(
      <BackupView
        report={{
          to: "/var/backups/consent",
          files: [{ file: "records/data.mdb", bytes: 905_216 }],
          identityKeyIncluded: false,
          warnings: ["no identity-key file: the daemon reads CONSENT_IDENTITY_KEY"],
        }}
      />,
    );
    const text = lastFrame() ?? "";
    expect(text).toMatch(/Backup\s+\/var\/backups\/consent/);
    expect(text).toMatch(/records\/data\.mdb\s+905,216 bytes/);
    expect(text).toContain("warning: no identity-key file: the daemon reads CONSENT_IDENTITY_KEY");
    expect(text).toContain("Restore: stop the service");
  });
});

/** Whether lines are a table: a header line of the headers, two spaces or more apart. */
const isTable = (lines: string[], headers: string[]) =>
  new RegExp(`^${headers.join(" {2,}")}$`).test(lines[0] ?? "");

// Regression: squeezed tables cut short values (`professi…`, `2026-11-…`, `pendi…`) before
// blocks were used.
describe("tables too wide for the terminal", () => {
  const created = at(Date.parse("2026-11-26T12:01:30Z"));

  /**
   * `view` as blocks at `narrow` columns, holding `blockLines` and nothing cut, and as a table of
   * `headers` at `wide`: the table's lines.
   */
  async function blocksThenTable(
    view: ReactElement,
    headers: string[],
    [narrow, wide]: [number, number],
    blockLines: string[],
  ): Promise<string[]> {
    const blocks = await terminalFrame(view, narrow);
    expect(isTable(blocks, headers)).toBe(false);
    for (const line of blockLines) expect(blocks).toContain(line);
    expect(blocks.join("\n")).not.toContain("…");
    const table = await terminalFrame(view, wide);
    expect(isTable(table, headers)).toBe(true);
    return table;
  }

  it("teams list prints blocks at 80 columns, and a table with plan and time whole where it fits", async () => {
    const teams = [
      create(TeamSchema, {
        id: "14f50966-74ff-4320-b9eb-7bb54c9228ee",
        name: "Acme Consent Management Ltd",
        plan: "professional",
        crossDeviceConsent: true,
        createdAt: created,
      }),
    ];
    const wide = await blocksThenTable(
      <TeamsTable teams={teams} />,
      ["ID", "NAME", "PLAN", "CROSS-DEVICE", "CREATED"],
      [80, 100],
      ["PLAN          professional", "CREATED       2026-11-26 12:01:30Z"],
    );
    expect(wide[1]).toMatch(/ {2}Acme Consen… {2}professional {2}yes {11}2026-11-26 12:01:30Z$/);
  });

  // Regression: a disabled endpoint's state held the daemon's reason, never cut, so the list
  // needed up to 148 columns and an endpoint disabled after five days of failures was never a
  // table on a 120-column terminal.
  it("webhooks list keeps a disabled endpoint's reason in a column of its own, cut to fit 120 columns", async () => {
    const webhook = (id: string, fields: Parameters<typeof create<typeof WebhookSchema>>[1]) =>
      create(WebhookSchema, {
        id,
        url: "https://crm.example.com/hooks/consent",
        eventTypes: ["consent.given", "consent.withdrawn"],
        enabled: true,
        ...fields,
      });
    const webhooks = [
      webhook("5b8d2c7e-0a4f-4e1b-9c3d-2f6a8b0c4d1e", {}),
      webhook("7c1e4f9a-2b3d-4c5e-8f7a-9b0c1d2e3f4a", { failingSince: created }),
      webhook("9e3a6b1d-4c7f-4a2e-8b5d-0c9f1e2a3b4c", {
        enabled: false,
        disabledReason: "every attempt failed for 5 days (since 2026-11-21T12:00:00.000Z)",
        disabledAt: created,
      }),
    ];
    const wide = await blocksThenTable(
      <WebhooksTable webhooks={webhooks} />,
      ["ID", "STATE", "REASON", "EVENTS", "BANNERS", "URL"],
      [80, 120],
      [
        "STATE    failing since 2026-11-26 12:01:30Z",
        "STATE    disabled",
        "REASON   every attempt failed for 5 days (since 2026-11-21T12:00:00.000Z)",
      ],
    );
    for (const line of wide) expect(textWidth(line)).toBeLessThanOrEqual(120);
    expect(wide[2]).toMatch(/ {2}failing since 2026-11-26 12:01:30Z {2}- {2}/);
    expect(wide[3]).toMatch(
      / {2}disabled {28}every atte… {2}consent\.gi… {2}all {6}https:\/\/cr…$/,
    );
    // Without a disabled endpoint there is no REASON column.
    const enabled = await terminalFrame(<WebhooksTable webhooks={webhooks.slice(0, 1)} />, 80);
    expect(isTable(enabled, ["ID", "STATE", "EVENTS", "BANNERS", "URL"])).toBe(true);
  });

  it("webhooks deliveries prints blocks at 120 columns rather than cut the status and times", async () => {
    const page = {
      deliveries: [
        create(DeliverySchema, {
          id: "0c4e8b4a-3f7e-4a55-9d0b-6f5e2d1c0b9a",
          status: "pending",
          attempts: 3,
          createdAt: created,
          lastAttemptAt: created,
          lastStatusCode: 503,
          nextAttemptAt: created,
          lastError: "the endpoint answered 503 Service Unavailable",
        }),
      ],
      nextPageToken: "",
    };
    const wide = await blocksThenTable(
      <DeliveriesTable page={page} />,
      ["ID", "STATUS", "TRIES", "CREATED", "LAST", "HTTP", "NEXT", "ERROR"],
      [120, 140],
      ["STATUS   pending", "CREATED  2026-11-26 12:01:30Z"],
    );
    expect(wide[1]).toContain("  pending  3      2026-11-26 12:01:30Z  2026-11-26 12:01:30Z  503 ");
  });
});
