import { randomUUID } from "node:crypto";
import type { Document } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { documentOf, emptyDatabase, storeOnStandIn } from "#daemon/store/mongo-wire-stand-in.js";
import { anEndpoint, aSucceededAttempt } from "#daemon/webhooks/webhook-store.contract.js";

/**
 * The MongoDB webhook adapter over the wire-protocol stand-in (mongo-wire-stand-in.ts), for the
 * server's replies a real server gives only in a race or a corner: what each of them means to
 * the port. The contract suite runs against a real server (store.test.ts).
 */

const opened: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((close) => close()));
});

async function open(database: ReturnType<typeof emptyDatabase>) {
  const standIn = await storeOnStandIn(database);
  opened.push(standIn.close);
  return standIn;
}

describe("MongoDB webhook store: a sweep's page", () => {
  it("hands out an empty page for a limit of 0, not every endpoint (the driver's limit 0)", async () => {
    const database = emptyDatabase();
    const endpoint = anEndpoint(randomUUID(), new Date());
    database.documents.set("webhook_endpoints", [documentOf(endpoint)]);
    const { store } = await open(database);
    expect(await store.webhooks.endpointsAfter(null, 0)).toEqual([]);
    expect(await store.webhooks.endpointsAfter(null, 1)).toEqual([endpoint]);
  });
});

describe("MongoDB webhook store: recording an attempt", () => {
  const now = new Date();
  const claimed = {
    _id: "d1",
    teamId: "t1",
    webhookId: "w1",
    eventId: "e1",
    eventType: "consent.given",
    publicId: "p1",
    payload: "{}",
    status: "pending",
    attempts: 0,
    createdAt: now,
    nextAttemptAt: now,
    leaseOwner: "daemon-1",
    leaseUntil: new Date(now.getTime() + 60_000),
    dueAt: new Date(now.getTime() + 60_000),
  };
  const result = aSucceededAttempt(now);
  /** A database holding the claimed delivery, whose replace the server answers with `reply`. */
  const answeringReplace = (reply: Document) => {
    const database = emptyDatabase(undefined, {
      update: (command) => (command.update === "webhook_deliveries" ? reply : { ok: 1, n: 1 }),
    });
    database.documents.set("webhook_deliveries", [claimed]);
    return database;
  };

  it("takes a replace the server matched but found nothing to change in as recorded", async () => {
    // A replace that matched leaves the delivery as the attempt has it, changed or not.
    const { store } = await open(answeringReplace({ ok: 1, n: 1, nModified: 0 }));
    expect(await store.webhooks.completeAttempt("d1", "daemon-1", 0, result)).toBe(true);
  });

  it("takes a replace that matched nothing as a delivery that moved on", async () => {
    const { store } = await open(answeringReplace({ ok: 1, n: 0, nModified: 0 }));
    expect(await store.webhooks.completeAttempt("d1", "daemon-1", 0, result)).toBe(false);
  });
});
