import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { emptyDatabase, storeOnStandIn } from "#daemon/store/mongo-wire-stand-in.js";
import { anEndpoint } from "#daemon/webhooks/webhook-store.contract.js";

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
    const { id, ...fields } = endpoint;
    database.documents.set("webhook_endpoints", [{ _id: id, ...fields }]);
    const { store } = await open(database);
    expect(await store.webhooks.endpointsAfter(null, 0)).toEqual([]);
    expect(await store.webhooks.endpointsAfter(null, 1)).toEqual([endpoint]);
  });
});
