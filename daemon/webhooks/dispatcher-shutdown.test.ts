import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { LEASE_MS, WebhookDispatcher } from "#daemon/webhooks/dispatcher.js";
import { appendConsentLog } from "#daemon/webhooks/outbox.js";
import { RETRY_DELAYS_MS } from "#daemon/webhooks/retry-schedule.js";
import { generateWebhookSecret, WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { anEndpoint } from "#daemon/webhooks/webhook-store.contract.js";
import { deliveryId, eventIdOf } from "#daemon/webhooks/webhook-store.js";
import { eventually, NEVER, WebhookReceiver } from "#test/support/webhook-receiver.js";

/** How long after the stop the attempts still in flight are cut, as a short drain would. */
const CUT_AFTER_MS = 300;

/**
 * A dispatcher stopped by a shutdown while its endpoint hangs (docs/webhooks.md, "Shutdown"): over
 * the real embedded store and a receiver on 127.0.0.1 that takes the request and never answers.
 */
describe("webhook attempts cut by a shutdown", () => {
  let dataDir: string;
  let store: Store;
  let receiver: WebhookReceiver;
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);
  const secrets = new WebhookSecretBox([Buffer.alloc(32, 7)]);
  const lines: { msg: string; attempts?: number }[] = [];
  const dispatchers: WebhookDispatcher[] = [];

  const aDispatcher = () => {
    const dispatcher = new WebhookDispatcher({
      store,
      clock,
      guard: new AddressGuard(["127.0.0.1/32"]),
      secrets,
      logger: pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
      pollIntervalMs: 50,
    });
    dispatchers.push(dispatcher);
    dispatcher.start();
    return dispatcher;
  };

  beforeEach(async () => {
    lines.length = 0;
    offsetMs = 0;
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-dispatcher-shutdown-"));
    store = await openLmdbStore({ dataDir });
    receiver = await new WebhookReceiver().start();
  });
  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((dispatcher) => dispatcher.stop()));
    await receiver.stop();
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("gives the delivery back due at once, its attempts and the endpoint's failure record as before the cut, and another dispatcher sends it at once", async () => {
    const teamId = randomUUID();
    const endpoint = {
      ...anEndpoint(teamId, clock()),
      url: `${receiver.url}?team=${teamId}`,
      sealedSecret: secrets.seal(generateWebhookSecret()),
    };
    expect(await store.webhooks.insertEndpoint(endpoint)).toBe(true);
    const row = aConsentLogRow(teamId, clock());
    const id = deliveryId(eventIdOf(row.id), endpoint.id);
    const delivery = () => store.webhooks.getDelivery(teamId, id);
    const failingSince = async () =>
      (await store.webhooks.getEndpoint(teamId, endpoint.id))?.failingSince;

    // A first attempt fails: one attempt counted, the endpoint failing since then.
    receiver.answer = () => ({ status: 500, body: "down" });
    const first = aDispatcher();
    await appendConsentLog(store, row);
    const failed = await eventually(
      async () => ((await delivery())?.attempts === 1 ? delivery() : undefined),
      "the first attempt is recorded",
    );
    expect(failed).toMatchObject({ status: "pending", lastStatusCode: 500 });
    const since = await eventually(failingSince, "the endpoint's failure record");

    // Its retry falls due and hangs: the request is read and never answered.
    receiver.answer = () => NEVER;
    offsetMs += RETRY_DELAYS_MS[0] * 2;
    await eventually(
      () => (receiver.received.length === 2 ? true : undefined),
      "the retry is sent",
    );
    const stoppedAt = Date.now();
    first.cutAfter(CUT_AFTER_MS);
    await first.stop();
    // Cut at its time, not at the attempt's 15 s bound.
    expect(Date.now() - stoppedAt).toBeLessThan(CUT_AFTER_MS + 2_000);
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: "webhook attempts cut by the shutdown: those their endpoints had not answered are due again at once",
        attempts: 1,
      }),
    );

    // As if the cut attempt had not been made: the first attempt's outcome, due, unleased.
    const given = await delivery();
    expect(given).toMatchObject({
      status: "pending",
      attempts: 1,
      lastStatusCode: 500,
      lastError: failed?.lastError,
      lastAttemptAt: failed?.lastAttemptAt,
      lastResponseExcerpt: "down",
    });
    expect(given?.leaseOwner).toBeUndefined();
    expect(given?.leaseUntil).toBeUndefined();
    expect(given?.nextAttemptAt?.getTime()).toBeLessThanOrEqual(clock().getTime());
    expect(given?.succeededAt).toBeUndefined();
    expect(await failingSince()).toEqual(since);

    // Another dispatcher claims it at its first pass, well before a lease (LEASE_MS) could end.
    receiver.answer = () => ({ status: 200, body: "ok" });
    aDispatcher();
    const delivered = await eventually(
      async () => ((await delivery())?.status === "succeeded" ? delivery() : undefined),
      "the delivery is sent again and delivered",
      LEASE_MS / 10,
    );
    expect(delivered).toMatchObject({ attempts: 2, lastStatusCode: 200 });
    expect(await failingSince()).toBeUndefined();
    // The same webhook-id every time: the cut attempt's request, read by the receiver, and its resend.
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual([
      eventIdOf(row.id),
      eventIdOf(row.id),
      eventIdOf(row.id),
    ]);
  });

  it("stops at once, cutting nothing, when no attempt is in flight", async () => {
    const dispatcher = aDispatcher();
    const stoppedAt = Date.now();
    dispatcher.cutAfter(CUT_AFTER_MS);
    await dispatcher.stop();
    expect(Date.now() - stoppedAt).toBeLessThan(CUT_AFTER_MS);
    // The cut's time passes after the stop: nothing is cut, nothing said.
    await new Promise((resolve) => setTimeout(resolve, CUT_AFTER_MS * 2));
    expect(lines.filter((line) => line.msg.includes("cut by the shutdown"))).toEqual([]);
  });
});
