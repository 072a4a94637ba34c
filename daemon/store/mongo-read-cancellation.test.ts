import { Code, ConnectError } from "@connectrpc/connect";
import type { Document } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { cursorReply, emptyDatabase, storeOnStandIn } from "#daemon/store/mongo-wire-stand-in.js";
import type { ReadCancellation, Store } from "#daemon/store/store.js";

/**
 * A read whose call is cancelled (ReadCancellation: its caller gone, its deadline passed) stops
 * its MongoDB command: the driver closes the connection the command waits on, on which MongoDB
 * kills it, instead of the read running to its end (or, on a stalled server, to its bound and the
 * driver's retry). Over a wire-protocol stand-in for the server (mongo-wire-stand-in.ts), which
 * holds the command unanswered and tells the connection's close.
 */

const closes: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closes.splice(0).map((close) => close()));
});

/** The caller's leaving, as the RPC edge aborts a call's signal with it. */
const LEFT = new ConnectError("the client left before its answer", Code.Canceled);

/** Each read a caller can start that can be long, and the command it sends. */
const READS: {
  read: string;
  command: (sent: Document) => boolean;
  call: (store: Store, cancel: ReadCancellation) => Promise<unknown>;
}[] = [
  {
    read: "a team's banners",
    command: (sent) => sent.find === "banners",
    call: (store, cancel) => store.banners.listByTeam("t1", cancel),
  },
  {
    read: "a team's keys",
    command: (sent) => sent.find === "api_keys",
    call: (store, cancel) => store.keys.listByTeam("t1", cancel),
  },
  {
    read: "a team's webhook endpoints",
    command: (sent) => sent.find === "webhook_endpoints",
    call: (store, cancel) => store.webhooks.listEndpoints("t1", cancel),
  },
  {
    read: "an endpoint's deliveries",
    command: (sent) => sent.find === "webhook_deliveries",
    call: (store, cancel) =>
      store.webhooks.listDeliveries({ teamId: "t1", webhookId: "w1", limit: 10, cancel }),
  },
  {
    read: "a listing of the consent log",
    command: (sent) => sent.find === "consent_log",
    call: (store, cancel) => store.consentLog.list({ teamId: "t1", limit: 10, cancel }),
  },
  {
    read: "a page of an export of the consent log",
    command: (sent) => sent.find === "consent_log",
    call: (store, cancel) => store.consentLog.listForward({ teamId: "t1", limit: 10, cancel }),
  },
  {
    read: "a tail's sweep of the consent log",
    command: (sent) => sent.find === "consent_log",
    call: (store, cancel) =>
      store.consentLog.listForward({ teamId: "t1", limit: 10, skipIds: new Set(["x"]), cancel }),
  },
  {
    read: "the consent log's counts",
    command: (sent) => sent.aggregate === "consent_log",
    call: (store, cancel) =>
      store.consentLog.stats({ teamId: "t1", requiredCategories: {}, cancel }),
  },
];

/** What `call` rejected with; undefined when it resolved. */
function rejectionOf(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
}

describe("MongoDB store: a read whose call is cancelled", () => {
  it.each(READS)(
    "stops $read: fails with the call's reason, its connection closed, the command not sent again",
    async ({ command, call }) => {
      const database = emptyDatabase();
      const { store, server, close } = await storeOnStandIn(database);
      closes.push(close);
      database.stopAnswering();
      const caller = new AbortController();
      const outcome = rejectionOf(call(store, caller));
      await expect.poll(() => server.commands.filter(command)).toHaveLength(1);
      caller.abort(LEFT);
      expect(await outcome).toBe(LEFT);
      const sent = server.commands.filter(command);
      await expect
        .poll(() => server.closedConnections.has(server.connectionOf(sent[0] ?? {}) ?? 0))
        .toBe(true);
      expect(server.commands.filter(command)).toHaveLength(1);
    },
  );

  it("stops a listing between its batches: the getMore under way ends with its cursor killed", async () => {
    const held: Document[] = [];
    let killed: (reply: Document) => void = () => {};
    const database = emptyDatabase(undefined, {
      // The first batch holds one banner and names cursor 7; its getMore is held, as a server
      // holds one still reading, until a killCursors kills the cursor under it.
      find: (sent) => cursorReply(`${sent.$db}.${sent.find}`, [{ _id: "b1" }], 7),
      getMore: (sent) => {
        held.push(sent);
        return new Promise<Document>((answer) => {
          killed = answer;
        });
      },
      killCursors: (sent) => {
        killed({ ok: 0, code: 237, codeName: "CursorKilled", errmsg: "cursor id 7 was killed" });
        return { cursorsKilled: sent.cursors, ok: 1 };
      },
    });
    const { store, server, close } = await storeOnStandIn(database);
    closes.push(close);
    const caller = new AbortController();
    const outcome = rejectionOf(store.banners.listByTeam("t1", caller));
    await expect.poll(() => held).toHaveLength(1);
    caller.abort(LEFT);
    // The call's reason, not the server's CursorKilled, which stopping the read met.
    expect(await outcome).toBe(LEFT);
    const kills = server.commands.filter((sent) => sent.killCursors === "banners");
    expect(kills.map((sent) => sent.cursors.map(Number))).toEqual([[7]]);
  });

  it("reads as before when its call goes on: the signal is only read as the read is sent", async () => {
    const database = emptyDatabase();
    const { store, close } = await storeOnStandIn(database);
    closes.push(close);
    let made = 0;
    const cancel = {
      get signal() {
        made += 1;
        return new AbortController().signal;
      },
    };
    expect(await store.banners.listByTeam("t1", cancel)).toEqual([]);
    expect(made).toBe(1);
  });
});
