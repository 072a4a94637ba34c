import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { argv, cliFor, E2E_TIMEOUT_MS } from "#cli/test-support/cli-process.js";
import { aChoice, ipSource, postLog } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * The daemon's clock: 12:00 UTC on 29 November is 01:45 on 30 November in Chatham (UTC+13:45 in
 * its summer), so a time or a day shown in the operator's zone differs from the UTC one.
 */
const NOW = "2026-11-29T12:00:00.000Z";

/** An operator in Chatham whose machine speaks German (1.001 for 1,001; "Sommerzeit"). */
const OPERATOR = { TZ: "Pacific/Chatham", LANG: "de_DE.UTF-8", LC_ALL: "de_DE.UTF-8" };

/** More rows than a thousand: a locale's digit grouping would show in every count. */
const ROWS = 1001;

/**
 * consentctl run as a process in the operator's zone and language: every time it prints, reads
 * or exports is UTC (formatTime's "…Z", RFC 3339), a date-time without a zone is refused rather
 * than read as local time, and counts carry no locale's grouping (README, cli/README.md).
 */
describe("consentctl in an operator's time zone and language", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;

  beforeAll(async () => {
    service = await startTestService({
      gateway: true,
      clock: () => new Date(NOW),
      env: { CONSENT_TRUST_PROXY: "127.0.0.1" },
    });
    cli = cliFor(service, OPERATOR);
    teamId = (await cli.json(argv`teams create --name ${"Zone team"} --plan professional`)).id;
    const banner = await cli.json(
      argv`banners create --team ${teamId} --name B --domain shop.example.com`,
    );
    const ip = ipSource();
    for (let sent = 0; sent < ROWS; sent += 100) {
      const batch = Array.from({ length: Math.min(100, ROWS - sent) }, () =>
        postLog(service, aChoice(banner.publicId, { timestamp: NOW }), { ip: ip() }),
      );
      for (const posted of await Promise.all(batch)) expect(posted.status).toBe(200);
    }
  });
  afterAll(() => service.close());

  it("shows stored times in UTC and reads --expires-at by its own offset", async () => {
    const shown = await cli.run(argv`teams show ${teamId}`);
    expect(shown.stdout).toMatch(/^Created\s+2026-11-29 12:00:00Z$/m);

    const key = await cli.run(
      argv`keys create --team ${teamId} --env live --scopes consent:read --expires-at 2026-12-01T10:00+13:45`,
    );
    expect(key.code).toBe(0);
    expect(key.stdout).toMatch(/^Expires\s+2026-11-30 20:15:00Z$/m);
    const listed = await cli.run(argv`keys list --team ${teamId}`);
    expect(listed.stdout).toContain("2026-11-30 20:15:00Z");
  });

  it("refuses a date-time or a date without a zone instead of reading it as local time", async () => {
    const key = await cli.run(
      argv`keys create --team ${teamId} --env live --scopes consent:read --expires-at 2026-12-01T10:00`,
    );
    expect(key.code).toBe(2);
    expect(key.stderr).toContain('"2026-12-01T10:00" is not an ISO 8601 date-time with a zone');
    const since = await cli.run(argv`logs list --team ${teamId} --since 2026-11-29`);
    expect(since.code).toBe(2);
    expect(since.stderr).toContain('"2026-11-29" is neither a date-time with a zone');
  });

  it("counts rows by UTC day, with no locale's digit grouping", async () => {
    const stats = await cli.run(argv`logs stats --team ${teamId}`);
    expect(stats.code).toBe(0);
    expect(stats.stdout).toMatch(/^Rows\s+1001$/m);
    expect(stats.stdout).toMatch(/^DAY \(UTC\)\s+ROWS\n2026-11-29\s+1001$/m);
    const list = await cli.run(argv`logs list --team ${teamId} --limit 1`);
    expect(list.stdout).toMatch(/^2026-11-29 12:00:00Z\s+consent_given/m);
  });

  it("exports UTC times in CSV and JSON Lines, and counts its progress without grouping", async () => {
    const csv = await cli.run(argv`logs export --team ${teamId} --format csv`);
    expect(csv.code).toBe(0);
    const [header, ...rows] = csv.stdout.trimEnd().split("\n");
    const columns = header?.split(",") ?? [];
    const cells = rows.map((row) => row.split(","));
    expect(rows).toHaveLength(ROWS);
    for (const name of ["receivedAt", "occurredAt"]) {
      const at = columns.indexOf(name);
      expect(new Set(cells.map((cell) => cell[at]))).toEqual(new Set([NOW]));
    }
    expect(csv.stderr).toContain("Exporting… 1000 rows\n");
    expect(csv.stderr).toContain("Exported 1001 rows as csv to stdout.");

    const jsonl = await cli.run(argv`logs export --team ${teamId} --since 2026-11-30T01:45+13:45`);
    const first = JSON.parse(jsonl.stdout.split("\n")[0] ?? "");
    expect(first).toMatchObject({
      receivedAt: NOW,
      occurredAt: NOW,
    });
  });
});
