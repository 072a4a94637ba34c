import { randomUUID } from "node:crypto";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import {
  CONSENT_ID_SCAN_LIMIT,
  type ConsentLogForwardQuery,
  type ConsentLogRecord,
} from "#daemon/consent-log/consent-log-store.js";
import { DuplicateKeyError } from "#daemon/store/store.js";
import {
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";

/** A row as the service stores one, received at `receivedAt`; for the contract and other tests. */
export function aConsentLogRow(
  teamId: string,
  receivedAt: Date,
  overrides: Partial<ConsentLogRecord> = {},
) {
  const row: ConsentLogRecord = {
    // The id carries the time of receipt, as the service makes it (UUIDv7).
    id: uuidv7({ msecs: receivedAt.getTime() }),
    teamId,
    bannerId: "banner-1",
    publicId: "pb_1",
    consentId: randomUUID(),
    method: "accept_all",
    preferences: { necessary: true, analytics: true },
    country: "DE",
    gpc: false,
    purposeChoices: { saleSharing: false },
    pageUrl: "https://example.com",
    occurredAt: shifted(receivedAt, -1000),
    timestampClamped: false,
    receivedAt,
    ...overrides,
  };
  return row;
}

/** The ConsentLogStore promises (daemon/consent-log/consent-log-store.ts), for any adapter. */
export function describeConsentLogStoreContract(openStore: OpenStore): void {
  describe("ConsentLogStore contract", () => {
    const store = useFreshStore(openStore);
    const now = new Date();
    const teamId = randomUUID();

    /** Appends `count` rows of the team, a minute apart from `now` on, and returns them oldest first. */
    async function appendRows(count: number, overrides: (i: number) => Partial<ConsentLogRecord>) {
      const rows = Array.from({ length: count }, (_, i) =>
        aConsentLogRow(teamId, shifted(now, i * MINUTE), overrides(i)),
      );
      for (const row of rows) await store().consentLog.append(row);
      return rows;
    }

    it("lists a team's rows newest first, with dates as Date objects", async () => {
      const rows = await appendRows(3, () => ({}));
      await store().consentLog.append(aConsentLogRow(randomUUID(), now));
      const listed = await store().consentLog.list({ teamId, limit: 10 });
      expect(listed).toEqual(rows.toReversed());
      expect(listed[0]?.receivedAt).toBeInstanceOf(Date);
      expect(await store().consentLog.list({ teamId: randomUUID(), limit: 10 })).toEqual([]);
    });

    it("rejects a second row with the same id", async () => {
      const row = aConsentLogRow(teamId, now);
      await store().consentLog.append(row);
      await expect(
        store().consentLog.append({ ...row, method: "reject_all" }),
      ).rejects.toBeInstanceOf(DuplicateKeyError);
      expect(await store().consentLog.list({ teamId, limit: 10 })).toEqual([row]);
    });

    it("filters by publicId and by methods", async () => {
      const rows = await appendRows(6, (i) => ({
        publicId: i % 2 === 0 ? "pb_even" : "pb_odd",
        method: ["accept_all", "reject_all", "custom"][i % 3] ?? "custom",
      }));
      const byPublicId = await store().consentLog.list({ teamId, publicId: "pb_even", limit: 10 });
      expect(byPublicId.map((r) => r.id)).toEqual([rows[4], rows[2], rows[0]].map((r) => r?.id));
      const byMethods = await store().consentLog.list({
        teamId,
        methods: ["reject_all", "custom"],
        limit: 10,
      });
      expect(byMethods.map((r) => r.id)).toEqual([5, 4, 2, 1].map((i) => rows[i]?.id));
      const both = { teamId, publicId: "pb_odd", methods: ["accept_all"], limit: 10 };
      expect((await store().consentLog.list(both)).map((r) => r.id)).toEqual([rows[3]?.id]);
    });

    it("selects one consent record's rows in every read, with the other filters and within the team", async () => {
      const consentId = randomUUID();
      const rows = await appendRows(6, (i) => ({
        consentId: i % 2 === 0 ? consentId : randomUUID(),
        publicId: i === 4 ? "pb_2" : "pb_1",
        method: i === 2 ? "consent_changed" : "accept_all",
      }));
      // Another team's row with the same consentId is never part of this team's reads.
      await store().consentLog.append(aConsentLogRow(randomUUID(), now, { consentId }));
      const own = [rows[0], rows[2], rows[4]];
      const log = store().consentLog;
      expect(await log.list({ teamId, consentId, limit: 10 })).toEqual(own.toReversed());
      expect(await log.list({ teamId, consentId, limit: 2 })).toEqual([rows[4], rows[2]]);
      expect(await log.list({ teamId, consentId, beforeId: rows[2]?.id, limit: 10 })).toEqual([
        rows[0],
      ]);
      expect(await log.list({ teamId, consentId, publicId: "pb_1", limit: 10 })).toEqual([
        rows[2],
        rows[0],
      ]);
      const since = rows[1]?.receivedAt;
      expect(await log.list({ teamId, consentId, since, limit: 10 })).toEqual([rows[4], rows[2]]);
      expect(await log.listForward({ teamId, consentId, limit: 10 })).toEqual(own);
      expect(await log.listForward({ teamId, consentId, afterId: rows[0]?.id, limit: 1 })).toEqual([
        rows[2],
      ]);
      const skipIds = new Set([rows[2]?.id] as string[]);
      expect(await log.listForward({ teamId, consentId, skipIds, limit: 10 })).toEqual([
        rows[0],
        rows[4],
      ]);
      const stats = await log.stats({ teamId, consentId, requiredCategories: {} });
      expect(stats.total).toBe(3);
      expect(stats.byMethod).toEqual({ accept_all: 2, consent_changed: 1 });
      const methods = ["consent_changed"];
      expect((await log.stats({ teamId, consentId, methods, requiredCategories: {} })).total).toBe(
        1,
      );
      expect(await log.list({ teamId, consentId: randomUUID(), limit: 10 })).toEqual([]);
    });

    it("filters by receivedAt: since inclusive, until exclusive", async () => {
      const rows = await appendRows(5, () => ({}));
      const since = rows[1]?.receivedAt;
      const until = rows[3]?.receivedAt;
      const listed = await store().consentLog.list({ teamId, since, until, limit: 10 });
      expect(listed.map((r) => r.id)).toEqual([rows[2], rows[1]].map((r) => r?.id));
    });

    it("selects a time range by receipt, also the rows whose id runs ahead of their receipt", async () => {
      const since = now;
      const until = shifted(now, 10 * MINUTE);
      // A daemon whose clock stepped back an hour gives ids of the time it had reached
      // (createLogIdGenerator): never below the receipt's time, but as far above it as that.
      const ahead = (receivedAt: Date) =>
        aConsentLogRow(teamId, receivedAt, {
          id: uuidv7({ msecs: receivedAt.getTime() + 60 * MINUTE }),
        });
      const first = aConsentLogRow(teamId, since);
      const last = ahead(shifted(until, -1));
      const before = ahead(shifted(since, -1));
      const after = aConsentLogRow(teamId, until);
      for (const row of [first, last, before, after]) await store().consentLog.append(row);
      const range = { teamId, since, until };
      const listed = await store().consentLog.list({ ...range, limit: 10 });
      expect(listed.map((row) => row.id)).toEqual([last.id, first.id]);
      const forward = await store().consentLog.listForward({ ...range, limit: 10 });
      expect(forward.map((row) => row.id)).toEqual([first.id, last.id]);
      const stats = await store().consentLog.stats({ ...range, requiredCategories: {} });
      expect(stats.total).toBe(2);
    });

    it("reads a range from since on where since's ids begin, never the team's older rows", async () => {
      // A row's id is never below its receipt's millisecond (lowestIdAt), so a read from `since`
      // starts at since's ids instead of passing over the whole older history. A row breaking
      // that rule (an id an hour before its receipt, which no daemon writes) shows where the
      // read begins: it is never met.
      const since = now;
      const inRange = aConsentLogRow(teamId, shifted(since, MINUTE));
      const idBefore = aConsentLogRow(teamId, shifted(since, 2 * MINUTE), {
        id: uuidv7({ msecs: since.getTime() - 60 * MINUTE }),
      });
      for (const row of [inRange, idBefore]) await store().consentLog.append(row);
      const listed = await store().consentLog.list({ teamId, since, limit: 10 });
      expect(listed.map((row) => row.id)).toEqual([inRange.id]);
      const forward = await store().consentLog.listForward({ teamId, since, limit: 10 });
      expect(forward.map((row) => row.id)).toEqual([inRange.id]);
      const stats = await store().consentLog.stats({ teamId, since, requiredCategories: {} });
      expect(stats.total).toBe(1);
      // Without since, every row of the team is read.
      expect(await store().consentLog.list({ teamId, limit: 10 })).toHaveLength(2);
    });

    it("names its highest id, of any team, and none while it holds no row", async () => {
      expect(await store().consentLog.newestId()).toBeUndefined();
      const [, newest] = await appendRows(2, () => ({}));
      expect(await store().consentLog.newestId()).toBe(newest?.id);
      const otherTeam = aConsentLogRow(randomUUID(), shifted(now, 10 * MINUTE));
      await store().consentLog.append(otherTeam);
      expect(await store().consentLog.newestId()).toBe(otherTeam.id);
    });

    it("pages with limit and beforeId through every matching row once", async () => {
      const rows = await appendRows(7, (i) => ({ method: i === 3 ? "custom" : "accept_all" }));
      const pages: string[][] = [];
      let beforeId: string | undefined;
      do {
        const page = await store().consentLog.list({
          teamId,
          methods: ["accept_all"],
          beforeId,
          limit: 2,
        });
        pages.push(page.map((r) => r.id));
        beforeId = page.length === 2 ? page[1]?.id : undefined;
      } while (beforeId !== undefined);
      const expected = [6, 5, 4, 2, 1, 0].map((i) => rows[i]?.id);
      expect(pages).toEqual([expected.slice(0, 2), expected.slice(2, 4), expected.slice(4, 6), []]);
    });

    it("returns only rows with an id lower than beforeId", async () => {
      const rows = await appendRows(3, () => ({}));
      const listed = await store().consentLog.list({ teamId, beforeId: rows[2]?.id, limit: 10 });
      expect(listed.map((r) => r.id)).toEqual([rows[1], rows[0]].map((r) => r?.id));
      expect(await store().consentLog.list({ teamId, beforeId: rows[0]?.id, limit: 10 })).toEqual(
        [],
      );
    });

    it("finds the newest row of a consentId, within the team only", async () => {
      const consentId = randomUUID();
      const rows = await appendRows(4, (i) => ({
        consentId: i === 3 ? randomUUID() : consentId,
        method: i === 0 ? "consent_default" : "consent_changed",
      }));
      await store().consentLog.append(
        aConsentLogRow(randomUUID(), shifted(now, 9 * MINUTE), { consentId }),
      );
      const latest = (team: string, id: string) =>
        store().consentLog.latestByConsentId(team, "banner-1", id);
      expect(await latest(teamId, consentId)).toEqual(rows[2]);
      expect(await latest(randomUUID(), rows[3]?.consentId ?? "")).toBe(null);
      expect(await latest(teamId, randomUUID())).toBe(null);
    });

    // Regression (audit A3): a consentId is the visitor's own value, so another banner of the
    // team may log rows with it; the preferences page of one banner must never see them.
    it("finds the newest row of a consentId for its banner, not another banner's of the team", async () => {
      const consentId = randomUUID();
      const banners = ["banner-1", "banner-2", "banner-1", "banner-2", "banner-2"];
      const rows = await appendRows(banners.length, (i) => ({
        consentId,
        bannerId: banners[i],
        publicId: banners[i] === "banner-1" ? "pb_1" : "pb_2",
        country: `C${i}`,
      }));
      const latest = (bannerId: string) =>
        store().consentLog.latestByConsentId(teamId, bannerId, consentId);
      expect(await latest("banner-1")).toEqual(rows[2]);
      expect(await latest("banner-2")).toEqual(rows[4]);
      expect(await latest("banner-3")).toBe(null);
    });

    it("looks at the consentId's CONSENT_ID_SCAN_LIMIT newest rows only, never answering another banner's", async () => {
      const consentId = randomUUID();
      const ownRow = aConsentLogRow(teamId, now, { consentId });
      await store().consentLog.append(ownRow);
      const othersRow = (i: number) =>
        aConsentLogRow(teamId, shifted(now, (i + 1) * 1000), { consentId, bannerId: "banner-2" });
      await Promise.all(
        Array.from({ length: CONSENT_ID_SCAN_LIMIT - 1 }, (_, i) =>
          store().consentLog.append(othersRow(i)),
        ),
      );
      const latest = () => store().consentLog.latestByConsentId(teamId, "banner-1", consentId);
      expect(await latest()).toEqual(ownRow);
      await store().consentLog.append(othersRow(CONSENT_ID_SCAN_LIMIT));
      expect(await latest()).toBe(null);
    });

    it("leaves the consentId index untouched by a refused duplicate", async () => {
      const row = aConsentLogRow(teamId, now);
      await store().consentLog.append(row);
      const duplicate = { ...row, consentId: randomUUID() };
      await expect(store().consentLog.append(duplicate)).rejects.toBeInstanceOf(DuplicateKeyError);
      const latest = (consentId: string) =>
        store().consentLog.latestByConsentId(teamId, row.bannerId, consentId);
      expect(await latest(duplicate.consentId)).toBe(null);
      expect(await latest(row.consentId)).toEqual(row);
    });

    it("reads forward: oldest first after afterId, with the same filters, in pages", async () => {
      const rows = await appendRows(6, (i) => ({ method: i === 2 ? "custom" : "accept_all" }));
      await store().consentLog.append(aConsentLogRow(randomUUID(), shifted(now, MINUTE)));
      const read = (afterId?: string) =>
        store().consentLog.listForward({ teamId, methods: ["accept_all"], afterId, limit: 2 });
      const pages: string[][] = [];
      let afterId: string | undefined;
      do {
        const page = await read(afterId);
        pages.push(page.map((r) => r.id));
        afterId = page.length === 2 ? page[1]?.id : undefined;
      } while (afterId !== undefined);
      const expected = [0, 1, 3, 4, 5].map((i) => rows[i]?.id);
      expect(pages).toEqual([expected.slice(0, 2), expected.slice(2, 4), expected.slice(4)]);
      const since = rows[1]?.receivedAt;
      const until = rows[4]?.receivedAt;
      const ranged = await store().consentLog.listForward({ teamId, since, until, limit: 10 });
      expect(ranged).toEqual([rows[1], rows[2], rows[3]]);
      expect(await store().consentLog.listForward({ teamId, limit: 0 })).toEqual([]);
    });

    it("reads forward past the ids it is told to skip, which do not count toward the limit", async () => {
      const rows = await appendRows(6, (i) => ({ method: i === 4 ? "custom" : "accept_all" }));
      const ids = rows.map((row) => row.id);
      const skipIds = new Set([ids[0], ids[2], ids[3]] as string[]);
      const read = (afterId?: string, methods?: string[]) =>
        store().consentLog.listForward({ teamId, methods, afterId, skipIds, limit: 2 });
      expect(await read()).toEqual([rows[1], rows[4]]);
      expect(await read(ids[1])).toEqual([rows[4], rows[5]]);
      expect(await read(undefined, ["accept_all"])).toEqual([rows[1], rows[5]]);
      // A page whose rows are all skipped is followed by the next: the limit is met if it can be.
      const most = new Set(ids.slice(0, 5) as string[]);
      expect(await store().consentLog.listForward({ teamId, skipIds: most, limit: 1 })).toEqual([
        rows[5],
      ]);
      expect(
        await store().consentLog.listForward({ teamId, skipIds: new Set(ids), limit: 3 }),
      ).toEqual([]);
    });

    it("skips ids within the query's other filters and its team alone", async () => {
      const rows = await appendRows(5, (i) => ({ publicId: i === 1 ? "pb_2" : "pb_1" }));
      const ids = rows.map((row) => row.id);
      // Another team's row between two of this team's, its id in the skipped set too.
      const foreign = aConsentLogRow(randomUUID(), shifted(now, 2 * MINUTE + 1));
      await store().consentLog.append(foreign);
      const skipIds = new Set([ids[2], foreign.id] as string[]);
      const forward = (query: Partial<ConsentLogForwardQuery>) =>
        store().consentLog.listForward({ teamId, skipIds, limit: 10, ...query });
      expect(await forward({})).toEqual([rows[0], rows[1], rows[3], rows[4]]);
      expect(await forward({ publicId: "pb_1" })).toEqual([rows[0], rows[3], rows[4]]);
      expect(await forward({ since: rows[1]?.receivedAt, until: rows[4]?.receivedAt })).toEqual([
        rows[1],
        rows[3],
      ]);
      // Skipped rows after the last one returned change nothing.
      expect(await forward({ skipIds: new Set([ids[3], ids[4]] as string[]) })).toEqual([
        rows[0],
        rows[1],
        rows[2],
      ]);
      expect(await forward({ teamId: foreign.teamId })).toEqual([]);
      expect(await forward({ teamId: foreign.teamId, skipIds: new Set() })).toEqual([foreign]);
    });

    it("counts rows by method and UTC day, and explicit choices that opted in", async () => {
      const day = new Date("2026-03-01T23:58:00Z");
      const rows: [string, Record<string, boolean>, string][] = [
        ["accept_all", { necessary: true, analytics: true }, "pb_a"],
        ["accept_necessary", { necessary: true, analytics: false }, "pb_a"],
        ["consent_default", { necessary: true, analytics: true }, "pb_a"],
        ["consent_given", { necessary: true, functional: true }, "pb_a"],
        ["consent_given", { essential: true, functional: true }, "pb_b"],
        ["consent_changed", {}, "pb_b"],
      ];
      for (const [i, [method, preferences, publicId]] of rows.entries()) {
        // Two minutes apart: the first two rows fall on 1 March, the rest on 2 March (UTC).
        const receivedAt = shifted(day, i * 2 * MINUTE);
        await store().consentLog.append(
          aConsentLogRow(teamId, receivedAt, { method, preferences, publicId }),
        );
      }
      await store().consentLog.append(aConsentLogRow(randomUUID(), day, { publicId: "pb_a" }));
      // functional is required for pb_b only; essential is required nowhere.
      const requiredCategories = { pb_a: ["necessary"], pb_b: ["functional"] };
      expect(await store().consentLog.stats({ teamId, requiredCategories })).toEqual({
        total: 6,
        byMethod: {
          accept_all: 1,
          accept_necessary: 1,
          consent_default: 1,
          consent_given: 2,
          consent_changed: 1,
        },
        byDay: [
          { day: "2026-03-01", count: 1 },
          { day: "2026-03-02", count: 5 },
        ],
        explicitChoices: 5,
        optedIn: 3,
      });
      const filtered = await store().consentLog.stats({
        teamId,
        publicId: "pb_a",
        methods: ["accept_all", "accept_necessary"],
        since: day,
        until: shifted(day, 3 * MINUTE),
        requiredCategories,
      });
      expect(filtered).toEqual({
        total: 2,
        byMethod: { accept_all: 1, accept_necessary: 1 },
        byDay: [
          { day: "2026-03-01", count: 1 },
          { day: "2026-03-02", count: 1 },
        ],
        explicitChoices: 2,
        optedIn: 1,
      });
      const empty = await store().consentLog.stats({
        teamId: randomUUID(),
        requiredCategories: {},
      });
      expect(empty).toEqual({ total: 0, byMethod: {}, byDay: [], explicitChoices: 0, optedIn: 0 });
    });
  });
}
