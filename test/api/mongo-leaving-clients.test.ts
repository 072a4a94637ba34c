import type { Document } from "mongodb";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { loadConfig } from "#daemon/config.js";
import { generateApiKey, keyHint, secretHash } from "#daemon/keys/api-key-format.js";
import { cursorReply, documentOf, emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { startGateway } from "#gateway/main.js";
import { leavingClient } from "#test/support/held-store-calls.js";
import { useStandInDaemon } from "#test/support/stand-in-daemon.js";

/**
 * docs/behaviour.md, "A client that leaves", on MongoDB: the daemon call of a REST client's read
 * is cancelled when the client leaves, and the store read under way with it, so MongoDB's command
 * stops (the driver closes the connection it waits on, on which the server kills it). Over a
 * wire-protocol stand-in for the server (mongo-wire-stand-in.ts), which holds the team's banner
 * read unanswered and tells the connection's close.
 */
describe("a REST client that leaves while MongoDB reads its answer", () => {
  const daemon = useStandInDaemon();

  it("has the banner list's command stopped on MongoDB, nothing logged", async () => {
    const now = new Date();
    const key = generateApiKey("live");
    const team = { id: "t1", name: "Acme", plan: "business", createdAt: now, updatedAt: now };
    const apiKey = {
      id: "k1",
      teamId: team.id,
      environment: "live",
      name: "reader",
      scopes: ["banners:read"],
      keyHash: secretHash(key),
      hint: keyHint(key),
      createdAt: now,
      expiresAt: null,
      revokedAt: null,
    };
    const bannerReads: Document[] = [];
    const database = emptyDatabase(undefined, {
      // The team's banners are never answered: a read still under way.
      find: (sent) => {
        if (sent.find !== "banners")
          return cursorReply(`${sent.$db}.${sent.find}`, documentsOf(sent.find));
        bannerReads.push(sent);
        return new Promise<Document>(() => {});
      },
      // The key's rate-limit window: its first request. Nothing else is found to update.
      findAndModify: (sent) => ({
        ok: 1,
        value:
          sent.findAndModify === "counters"
            ? { _id: sent.query._id, count: 1, expiresAt: new Date(now.getTime() + 900_000) }
            : null,
      }),
    });
    const documentsOf = (collection: string) =>
      collection === "teams"
        ? [documentOf(team)]
        : collection === "api_keys"
          ? [documentOf(apiKey)]
          : [];
    // A reply waited for 15 s: the command is stopped by the client's leaving, not that bound.
    const running = await daemon.start(database, 10_000);
    const gateway = await startGateway({
      config: loadConfig({ CONSENT_HTTP_PORT: "0" }),
      transport: createDaemonTransport({ baseUrl: running.daemonUrl }),
      operatorToken: daemon.asOperator.headers.authorization.replace(/^Bearer /, ""),
      logger: pino({ level: "silent" }),
    });
    try {
      const leaving = leavingClient(`${gateway.url}/api/v1/banners`, "GET", {
        authorization: `Bearer ${key}`,
      });
      await expect.poll(() => bannerReads, { timeout: 5_000 }).toHaveLength(1);
      leaving.leave();
      const connection = running.server.connectionOf(bannerReads[0] ?? {}) ?? 0;
      await expect
        .poll(() => running.server.closedConnections.has(connection), { timeout: 5_000 })
        .toBe(true);
      // Not sent again: the read was stopped, not lost.
      expect(running.server.commands.filter((sent) => sent.find === "banners")).toHaveLength(1);
      expect(running.logs).toEqual([]);
    } finally {
      await gateway.close();
    }
  });
});
