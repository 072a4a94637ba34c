import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { aChoice } from "#test/support/consent-log.js";
import { holdStoreCalls, leavingClient } from "#test/support/held-store-calls.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * docs/behaviour.md, "A client that leaves": a REST client that closes its connection before its
 * answer cancels the daemon call of its read, in one process and split alike; a write it sent
 * whole is carried out all the same.
 */
describe("a client that leaves before its answer", () => {
  let service: TestService;
  const logs: Record<string, unknown>[] = [];
  let key: string;
  let publicId: string;

  beforeAll(async () => {
    service = await startTestService({
      gateway: true,
      env: { CONSENT_TRUST_PROXY: "127.0.0.1" },
      onLog: (entry) => logs.push(entry),
    });
    key = (await mintKey(service, await createTeam(service, "business"))).key;
    ({ publicId } = await createBanner(service, key));
  });
  afterAll(() => service.close());

  const url = (path: string) => `${service.gatewayUrl}${path}`;

  it("has its banner list cancelled in the daemon: queued behind a slow one, it is never read", async () => {
    // A team's lists run one after another (daemon/banners/banner-service.ts): the first is held
    // in the store, the second waits behind it and its client leaves, the third waits behind both.
    const lists = holdStoreCalls(service.store.banners, "listByTeam");
    try {
      const first = http(service, "GET", "/api/v1/banners", { key });
      await lists.arrived(1);
      const leaving = leavingClient(url("/api/v1/banners"), "GET", {
        authorization: `Bearer ${key}`,
      });
      // The second list waits in the daemon behind the first.
      await sleep(300);
      const third = http(service, "GET", "/api/v1/banners", { key });
      await sleep(100);
      leaving.leave();
      await sleep(100);
      lists.release();
      expect((await first).status).toBe(200);
      // Served after the second's turn: that list was never read from the store.
      const answered = await third;
      expect([answered.status, answered.body.data.banners.length]).toEqual([200, 1]);
      expect(lists.calls).toBe(2);
    } finally {
      lists.restore();
    }
    // No failure is reported for it: nothing failed, nobody was there for an answer.
    expect(logs.filter((entry) => Number(entry.level) >= 50)).toEqual([]);
  });

  it("has its resolve given up without a failure logged, its body read whole before it left", async () => {
    const finds = holdStoreCalls(service.store.subjects, "find");
    const before = logs.length;
    try {
      const leaving = leavingClient(
        url("/api/v1/consent/subjects/resolve"),
        "POST",
        { authorization: `Bearer ${key}`, "content-type": "application/json" },
        JSON.stringify({ bannerId: publicId, subjectId: "left-while-resolving" }),
      );
      await finds.arrived(1);
      leaving.leave();
      await sleep(100);
    } finally {
      finds.release();
      finds.restore();
    }
    await sleep(100);
    expect(logs.slice(before).filter((entry) => Number(entry.level) >= 50)).toEqual([]);
  });

  it("still has its subject state written when it leaves while the write is under way", async () => {
    const writes = holdStoreCalls(service.store.subjects, "write");
    const subject = { bannerId: publicId, subjectId: "left-after-sending" };
    try {
      const leaving = leavingClient(
        url("/api/v1/consent/subjects/state"),
        "PUT",
        { authorization: `Bearer ${key}`, "content-type": "application/json" },
        JSON.stringify({ ...subject, baseVersion: 0, consentState: consentState() }),
      );
      await writes.arrived(1);
      leaving.leave();
      await sleep(100);
      writes.release();
      await expect
        .poll(
          async () =>
            (
              await http(service, "POST", "/api/v1/consent/subjects/resolve", {
                key,
                body: subject,
              })
            ).body.data,
        )
        .toMatchObject({ found: true, version: 1, consentState: consentState() });
    } finally {
      writes.restore();
    }
  });

  it("still has its consent recorded when it leaves while the append is under way", async () => {
    const appends = holdStoreCalls(service.store.consentLog, "append");
    const consentId = "0b6c1f52-3d0e-4c1a-9f43-5a0e7d6c2b11";
    try {
      const leaving = leavingClient(
        url("/api/consent/log"),
        "POST",
        { "content-type": "text/plain;charset=UTF-8", origin: "https://shop.example.com" },
        JSON.stringify(aChoice(publicId, { consentId })),
      );
      await appends.arrived(1);
      leaving.leave();
      await sleep(100);
      appends.release();
      const teamId = (await service.store.banners.getByPublicId(publicId))?.teamId ?? "";
      await expect
        .poll(
          async () =>
            (await service.store.consentLog.list({ teamId, consentId, limit: 10 })).length,
        )
        .toBe(1);
    } finally {
      appends.restore();
    }
  });
});
