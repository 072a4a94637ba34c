import { afterEach, describe, expect, it } from "vitest";
import { aSession } from "#daemon/sessions/session-store.contract.js";
import { documentOf, emptyDatabase, storeOnStandIn } from "#daemon/store/mongo-wire-stand-in.js";
import { DAY, MINUTE, shifted } from "#daemon/store/store-contract-harness.js";

const opened: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((close) => close()));
});

describe("MongoDB session store: a session past its expiry that the TTL monitor has not removed yet", () => {
  it("is absent to a look-up by token hash or id, and to a revocation, from its expiry on", async () => {
    // The server's TTL monitor drops a session about a minute after its expiry: until then the
    // server still holds it, which the stand-in plays by answering every find with it.
    const now = new Date();
    const session = aSession(shifted(now, -DAY), now);
    const { id } = session;
    const database = emptyDatabase();
    database.documents.set("sessions", [documentOf(session)]);
    const standIn = await storeOnStandIn(database);
    opened.push(standIn.close);
    const { sessions } = standIn.store;
    expect(await sessions.findByHash(session.tokenHash, shifted(now, -1))).toEqual(session);
    for (const at of [now, shifted(now, MINUTE)]) {
      expect(await sessions.findByHash(session.tokenHash, at)).toBeNull();
      expect(await sessions.get(id, at)).toBeNull();
      expect(await sessions.revoke(id, at)).toBeNull();
    }
    // The revocation asks the server to leave an expired session as it is.
    const revocations = standIn.server.commands.filter((sent) => sent.findAndModify === "sessions");
    expect(revocations.map((sent) => sent.query.expiresAt)).toEqual([
      { $gt: now },
      { $gt: shifted(now, MINUTE) },
    ]);
  });
});
