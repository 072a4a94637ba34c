import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { type HeldCalls, holdStoreCalls } from "#test/support/held-store-calls.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { listOnItsOwnConnection } from "#test/support/team-lists.js";

/**
 * A team's lists run one after another in the daemon (daemon/banners/banner-service.ts): one whose
 * call is aborted while it waits its turn is not read, and ends as its abort says.
 */
describe("a banner list whose deadline passes while it waits behind the team's list before it", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
  });
  afterAll(() => service.close());

  /** A team with one banner and its live key, its list reads held in the store during `body`. */
  async function withListsHeld(body: (key: string, lists: HeldCalls) => Promise<void>) {
    const key = (await mintKey(service, await createTeam(service))).key;
    await createBanner(service, key);
    const lists = holdStoreCalls(service.store.banners, "listByTeam");
    try {
      await body(key, lists);
    } finally {
      lists.release();
      lists.restore();
    }
  }

  // Regression: it ended CANCELED, "the caller has left", which the gateway answers 500; a deadline
  // is the service briefly unavailable (spec 7: 5xx retried), 503 through the gateway.
  it("is answered DEADLINE_EXCEEDED, never read from the store", () =>
    withListsHeld(async (key, lists) => {
      // Calls with a deadline, as gRPC and Connect clients send it (connect-timeout-ms).
      const first = listOnItsOwnConnection(service.daemonUrl, key, {
        headers: { "connect-timeout-ms": "10000" },
      });
      await lists.arrived(1);
      const late = listOnItsOwnConnection(service.daemonUrl, key, {
        headers: { "connect-timeout-ms": "200" },
      });
      await sleep(400);
      lists.release();
      expect((await first.body).status).toBe(200);
      const answer = await late.body;
      expect([answer.status, JSON.parse(answer.text)]).toEqual([
        504,
        { code: "deadline_exceeded", message: "the operation timed out" },
      ]);
      expect(lists.calls).toBe(1);
    }));

  // Regression: each transport had a banner service of its own (the short Connect routes, the
  // in-process transport of `npm start`), so a list through the REST gateway and one to the
  // daemon's port ran side by side, each with its own queue.
  it("waits behind the team's list through the gateway when it comes to the daemon's port", () =>
    withListsHeld(async (key, lists) => {
      const throughGateway = http(service, "GET", "/api/v1/banners", { key });
      await lists.arrived(1);
      const direct = listOnItsOwnConnection(service.daemonUrl, key);
      // Long enough for the direct list to reach the store, were it not queued.
      await sleep(400);
      expect(lists.calls).toBe(1);
      lists.release();
      expect((await throughGateway).status).toBe(200);
      expect((await direct.body).status).toBe(200);
      expect(lists.calls).toBe(2);
    }));

  // Regression: an aborted list learnt of its abort only when its turn came, so its client waited
  // as long as the list before it (a held store, an answer left unread) whatever its deadline.
  it("is answered as its deadline passes, while the list before it is still being read", () =>
    withListsHeld(async (key, lists) => {
      const first = http(service, "GET", "/api/v1/banners", { key });
      await lists.arrived(1);
      const late = listOnItsOwnConnection(service.daemonUrl, key, {
        headers: { "connect-timeout-ms": "200" },
      });
      // Answered with the first list still held in the store.
      const answer = await late.body;
      expect([answer.status, JSON.parse(answer.text).code, lists.calls]).toEqual([
        504,
        "deadline_exceeded",
        1,
      ]);
      lists.release();
      expect((await first).status).toBe(200);
      expect(lists.calls).toBe(1);
    }));
});
