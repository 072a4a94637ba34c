import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import {
  documentOf,
  emptyDatabase,
  storeOnStandIn,
  writeConcernTimedOut,
} from "#daemon/store/mongo-wire-stand-in.js";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { WebhookDispatcher } from "#daemon/webhooks/dispatcher.js";
import { WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { anEndpoint } from "#daemon/webhooks/webhook-store.contract.js";
import { deliveryId, eventIdOf } from "#daemon/webhooks/webhook-store.js";
import { type FailureLine, failureWords } from "#test/support/failure-lines.js";

describe("webhook dispatch over a store that fails two fan-outs of one pass", () => {
  it.each([
    ["the refused event first", false],
    ["the unanswered event first", true],
  ])(
    "logs the store out of reach as its warning and the other failure as an error, %s",
    async (_, reversed) => {
      const now = new Date();
      const teamId = randomUUID();
      const endpoint = anEndpoint(teamId, now);
      const [refused, unanswered] = [aConsentLogRow(teamId, now), aConsentLogRow(teamId, now)];
      const deliveryOf = (row: { id: string }) => deliveryId(eventIdOf(row.id), endpoint.id);
      // Both events due, claimed in this order: the fan-out of one is refused for another reason
      // than the store's state, the other's majority does not answer in time.
      const due = reversed ? [unanswered, refused] : [refused, unanswered];
      const database = emptyDatabase(undefined, {
        findAndModify: (command) => {
          const row = command.query["outbox.dueAt"]?.$lte ? due.shift() : undefined;
          return {
            lastErrorObject: { n: row ? 1 : 0 },
            value: row ? documentOf(row) : null,
            ok: 1,
          };
        },
        distinct: () => ({ values: [teamId], ok: 1 }),
        update: (command) => {
          const id = command.updates[0]?.q._id;
          if (id === deliveryOf(refused)) {
            return { ok: 0, code: 2, codeName: "BadValue", errmsg: "a refusal of another kind" };
          }
          if (id === deliveryOf(unanswered)) {
            return writeConcernTimedOut();
          }
          return { ok: 1, n: 1, nModified: 1 };
        },
      });
      database.documents.set("consent_log", [documentOf(refused), documentOf(unanswered)]);
      database.documents.set("webhook_endpoints", [documentOf(endpoint)]);
      const { store, close } = await storeOnStandIn(database);
      const lines: FailureLine[] = [];
      const dispatcher = new WebhookDispatcher({
        store,
        clock: () => new Date(),
        guard: new AddressGuard([]),
        secrets: new WebhookSecretBox([Buffer.alloc(32, 1)]),
        logger: pino({ level: "debug" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
        pollIntervalMs: 60_000,
      });
      try {
        dispatcher.start();
        await expect.poll(() => lines.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
        const expected = [
          [50, "webhook dispatch pass failed", "a refusal of another kind"],
          [
            40,
            "the store cannot be reached; webhook deliveries wait until it can",
            "waiting for replication timed out",
          ],
        ];
        expect(failureWords(lines)).toEqual(reversed ? expected.reverse() : expected);
      } finally {
        await dispatcher.stop();
        await close();
      }
    },
  );
});
