import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { turnsDuring } from "#test/support/event-loop.js";

describe("the embedded store's consent log reads of many rows", () => {
  let dir: string;
  let store: Store;
  const teamId = randomUUID();
  const rows = 2_500;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "consent-log-reads-"));
    store = await openLmdbStore({ dataDir: dir });
    const start = Date.parse("2026-11-27T12:00:00.000Z");
    await Promise.all(
      Array.from({ length: rows }, (_, i) =>
        store.consentLog.append(aConsentLogRow(teamId, new Date(start + i))),
      ),
    );
  });
  afterAll(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("let the process serve other requests while they pass over thousands of rows", async () => {
    const stats = await turnsDuring(() =>
      store.consentLog.stats({ teamId, requiredCategories: {} }),
    );
    expect(stats.turns).toBeGreaterThanOrEqual(2);
    expect(stats.result.total).toBe(rows);
    // A filter nothing matches: a listing passes over every row of the team.
    const none = { teamId, methods: ["consent_changed"], limit: 10 };
    expect((await turnsDuring(() => store.consentLog.list(none))).turns).toBeGreaterThanOrEqual(2);
    const forward = await turnsDuring(() => store.consentLog.listForward(none));
    expect(forward.turns).toBeGreaterThanOrEqual(2);
  });

  it("let it serve others while a tail's read passes over thousands of ids it holds already", async () => {
    const all = await store.consentLog.listForward({ teamId, limit: rows });
    const held = new Set(all.slice(0, rows - 10).map((row) => row.id));
    const sweep = await turnsDuring(() =>
      store.consentLog.listForward({ teamId, skipIds: held, limit: 100 }),
    );
    expect(sweep.turns).toBeGreaterThanOrEqual(2);
    expect(sweep.result.map((row) => row.id)).toEqual(all.slice(rows - 10).map((row) => row.id));
  });
});
