import { randomUUID } from "node:crypto";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import {
  DAY,
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";
import {
  type AttemptResult,
  type DeliveryRecord,
  deliveryId,
  eventIdOf,
  type WebhookEndpointRecord,
} from "#daemon/webhooks/webhook-store.js";

function aRow(teamId: string, receivedAt: Date, method = "accept_all"): ConsentLogRecord {
  return {
    id: uuidv7({ msecs: receivedAt.getTime() }),
    teamId,
    bannerId: "banner-1",
    publicId: randomUUID(),
    consentId: randomUUID(),
    method,
    preferences: { necessary: true },
    occurredAt: receivedAt,
    timestampClamped: false,
    receivedAt,
  };
}

export function anEndpoint(teamId: string, createdAt: Date): WebhookEndpointRecord {
  return {
    id: randomUUID(),
    teamId,
    url: "https://hooks.example.com/consent",
    eventTypes: ["consent.given"],
    bannerIds: [],
    description: "",
    enabled: true,
    sealedSecret: "v1.sealed",
    createdAt,
    updatedAt: createdAt,
    version: 1,
  };
}

/** A first attempt the receiver answered with `statusCode` at `at`. */
export function aSucceededAttempt(at: Date, statusCode = 204): AttemptResult {
  return {
    attempts: 1,
    status: "succeeded",
    lastAttemptAt: at,
    lastStatusCode: statusCode,
    succeededAt: at,
  };
}

function aDelivery(row: ConsentLogRecord, webhookId: string): DeliveryRecord {
  const eventId = eventIdOf(row.id);
  return {
    id: deliveryId(eventId, webhookId),
    teamId: row.teamId,
    webhookId,
    eventId,
    eventType: "consent.given",
    publicId: row.publicId,
    payload: "{}",
    status: "pending",
    attempts: 0,
    createdAt: row.receivedAt,
    nextAttemptAt: row.receivedAt,
  };
}

/** The WebhookStore promises (daemon/webhooks/webhook-store.ts), for any adapter. */
export function describeWebhookStoreContract(openStore: OpenStore): void {
  describe("WebhookStore contract", () => {
    const store = useFreshStore(openStore);
    const now = new Date();
    const teamId = randomUUID();
    const lease = (owner: string, at = now) => ({ owner, until: shifted(at, MINUTE) });

    /** One pending delivery to each endpoint listed, each of its own event, due in list order. */
    async function dueInOrder(endpoints: readonly WebhookEndpointRecord[]) {
      for (const [i, endpoint] of endpoints.entries()) {
        const row = aRow(endpoint.teamId, shifted(now, i));
        await store().webhooks.fanOut(row.id, [aDelivery(row, endpoint.id)]);
      }
    }

    it("stores endpoints per team and replaces them by version", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      expect(await store().webhooks.getEndpoint(teamId, endpoint.id)).toEqual(endpoint);
      expect(await store().webhooks.getEndpoint(randomUUID(), endpoint.id)).toBeNull();
      expect(await store().webhooks.listEndpoints(teamId)).toEqual([endpoint]);
      const next = { ...endpoint, enabled: false, disabledReason: "gone", version: 2 };
      const results = await Promise.all([
        store().webhooks.replaceEndpoint(next, 1),
        store().webhooks.replaceEndpoint({ ...next, disabledReason: "other" }, 1),
      ]);
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await store().webhooks.deleteEndpoint(randomUUID(), endpoint.id)).toBe(false);
      expect(await store().webhooks.deleteEndpoint(teamId, endpoint.id)).toBe(true);
      expect(await store().webhooks.listEndpoints(teamId)).toEqual([]);
    });

    it("hands out every team's endpoints page by page, in id order, each once", async () => {
      const other = randomUUID();
      const stored = [teamId, other, teamId, other, teamId].map((team, i) =>
        anEndpoint(team, shifted(now, i)),
      );
      for (const endpoint of stored) await store().webhooks.insertEndpoint(endpoint);
      const pages: WebhookEndpointRecord[][] = [];
      let after: string | null = null;
      for (;;) {
        const page: WebhookEndpointRecord[] = await store().webhooks.endpointsAfter(after, 2);
        if (page.length === 0) break;
        pages.push(page);
        after = page.at(-1)?.id ?? null;
      }
      const byId = [...stored].sort((a, b) => (a.id < b.id ? -1 : 1));
      expect(pages.map((page) => page.length)).toEqual([2, 2, 1]);
      expect(pages.flat()).toEqual(byId);
      // A page after an id no endpoint has starts at the next one.
      const [first, second] = byId as [WebhookEndpointRecord, WebhookEndpointRecord];
      const between = `${first.id}0`;
      expect(between > first.id && between < second.id).toBe(true);
      expect((await store().webhooks.endpointsAfter(between, 1)).map((e) => e.id)).toEqual([
        second.id,
      ]);
    });

    it("hands out an empty page for a limit of 0 or less, whatever is stored", async () => {
      const stored = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(stored);
      for (const limit of [0, -1]) {
        expect(await store().webhooks.endpointsAfter(null, limit)).toEqual([]);
      }
      expect(await store().webhooks.endpointsAfter(null, 1)).toEqual([stored]);
    });

    it("throws on a replace that would move an endpoint to another team or creation time", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      for (const moved of [{ teamId: randomUUID() }, { createdAt: shifted(now, MINUTE) }]) {
        const next = { ...endpoint, ...moved, description: "moved", version: 2 };
        await expect(store().webhooks.replaceEndpoint(next, 1)).rejects.toBeInstanceOf(RangeError);
      }
      expect(await store().webhooks.getEndpoint(teamId, endpoint.id)).toEqual(endpoint);
      // A stale version is a refusal, whatever else the record says.
      const stale = { ...endpoint, teamId: randomUUID(), version: 3 };
      expect(await store().webhooks.replaceEndpoint(stale, 2)).toBe(false);
    });

    it("refuses an endpoint beyond the team's maximum, however many inserts race", async () => {
      const max = 5;
      const racing = Array.from({ length: 12 }, (_, i) => anEndpoint(teamId, shifted(now, i)));
      const results = await Promise.all(
        racing.map((endpoint) => store().webhooks.insertEndpoint(endpoint, max)),
      );
      expect(results.filter(Boolean)).toHaveLength(max);
      const accepted = racing.filter((_, i) => results[i]);
      expect(await store().webhooks.listEndpoints(teamId)).toEqual(accepted);
      for (const endpoint of accepted) {
        expect(await store().webhooks.getEndpoint(teamId, endpoint.id)).toEqual(endpoint);
      }
      const late = anEndpoint(teamId, shifted(now, 100));
      expect(await store().webhooks.insertEndpoint(late, max)).toBe(false);
      expect(await store().webhooks.getEndpoint(teamId, late.id)).toBeNull();
      // Another team has a maximum of its own; a removal makes room again.
      expect(await store().webhooks.insertEndpoint(anEndpoint(randomUUID(), now), max)).toBe(true);
      expect(await store().webhooks.deleteEndpoint(teamId, accepted[0]?.id ?? "")).toBe(true);
      expect(await store().webhooks.insertEndpoint(late, max)).toBe(true);
      await expect(store().webhooks.insertEndpoint(anEndpoint(teamId, now), max)).resolves.toBe(
        false,
      );
      // Without a maximum nothing is counted; with one, such an endpoint counts as any other.
      expect(await store().webhooks.insertEndpoint(anEndpoint(teamId, now))).toBe(true);
      expect(await store().webhooks.listEndpoints(teamId)).toHaveLength(max + 1);
      const other = randomUUID();
      await store().webhooks.insertEndpoint(anEndpoint(other, now));
      const rest = Array.from({ length: max }, (_, i) => anEndpoint(other, shifted(now, i + 1)));
      const more = await Promise.all(
        rest.map((endpoint) => store().webhooks.insertEndpoint(endpoint, max)),
      );
      expect(more.filter(Boolean)).toHaveLength(max - 1);
      expect(await store().webhooks.listEndpoints(other)).toHaveLength(max);
    });

    it("keeps to a maximum lower than the team's endpoints were stored under, and counts those stored without one", async () => {
      // Stored under a maximum of 50, then 8 inserts race under a maximum of 12.
      const earlier = Array.from({ length: 50 }, (_, i) => anEndpoint(teamId, shifted(now, i)));
      for (const endpoint of earlier) await store().webhooks.insertEndpoint(endpoint, 50);
      for (const endpoint of earlier.slice(0, 40)) {
        await store().webhooks.deleteEndpoint(teamId, endpoint.id);
      }
      const lowered = await Promise.all(
        Array.from({ length: 8 }, () =>
          store().webhooks.insertEndpoint(anEndpoint(teamId, now), 12),
        ),
      );
      expect(lowered.filter(Boolean)).toHaveLength(2);
      expect(await store().webhooks.listEndpoints(teamId)).toHaveLength(12);

      // Endpoints stored without a maximum count as much as the others.
      const other = randomUUID();
      const counted = Array.from({ length: 5 }, () => anEndpoint(other, now));
      for (const endpoint of counted) await store().webhooks.insertEndpoint(endpoint, 5);
      await store().webhooks.insertEndpoint(anEndpoint(other, now));
      for (const endpoint of counted.slice(0, 2)) {
        await store().webhooks.deleteEndpoint(other, endpoint.id);
      }
      const racing = await Promise.all(
        Array.from({ length: 4 }, () => store().webhooks.insertEndpoint(anEndpoint(other, now), 5)),
      );
      expect(racing.filter(Boolean)).toHaveLength(1);
      expect(await store().webhooks.listEndpoints(other)).toHaveLength(5);
    });

    it("replaces an endpoint with the record given: fields it leaves out are gone", async () => {
      const endpoint = {
        ...anEndpoint(teamId, now),
        sealedPreviousSecret: "v1.previous",
        previousSecretExpiresAt: shifted(now, MINUTE),
        failingSince: now,
      };
      expect(await store().webhooks.insertEndpoint(endpoint, 5)).toBe(true);
      const {
        sealedPreviousSecret: _secret,
        previousSecretExpiresAt: _expiresAt,
        failingSince: _failingSince,
        ...kept
      } = endpoint;
      const next = { ...kept, description: "changed", updatedAt: shifted(now, 1), version: 2 };
      expect(await store().webhooks.replaceEndpoint(next, 1)).toBe(true);
      expect(await store().webhooks.getEndpoint(teamId, endpoint.id)).toEqual(next);
      expect(await store().webhooks.listEndpoints(teamId)).toEqual([next]);
      // The replaced endpoint still counts against the team's maximum.
      expect(await store().webhooks.insertEndpoint(anEndpoint(teamId, now), 1)).toBe(false);
    });

    it("puts an explicit choice's event in the outbox with its row, and nothing for a default row", async () => {
      await store().webhooks.insertEndpoint(anEndpoint(teamId, now));
      const explicit = aRow(teamId, now);
      const byDefault = aRow(teamId, shifted(now, 1), "consent_default");
      await store().consentLog.append(explicit, { event: "consent.given" });
      await store().consentLog.append(byDefault);
      const claimed = await store().webhooks.claimEvents(lease("a"), shifted(now, 10), 10);
      expect(claimed).toEqual([explicit]);
    });

    it("leaves a failed append without an event", async () => {
      await store().webhooks.insertEndpoint(anEndpoint(teamId, now));
      const row = aRow(teamId, now, "consent_default");
      await store().consentLog.append(row);
      await expect(
        store().consentLog.append({ ...row, method: "accept_all" }, { event: "consent.given" }),
      ).rejects.toThrow();
      expect(await store().webhooks.claimEvents(lease("a"), shifted(now, 10), 10)).toEqual([]);
    });

    it("hands an event to one of two racing claimers, and again once the lease expires", async () => {
      await store().webhooks.insertEndpoint(anEndpoint(teamId, now));
      const row = aRow(teamId, now);
      await store().consentLog.append(row, { event: "consent.given" });
      const [a, b] = await Promise.all([
        store().webhooks.claimEvents(lease("a"), now, 10),
        store().webhooks.claimEvents(lease("b"), now, 10),
      ]);
      expect(a.length + b.length).toBe(1);
      expect(await store().webhooks.claimEvents(lease("c"), shifted(now, 1000), 10)).toEqual([]);
      const later = shifted(now, 2 * MINUTE);
      expect(await store().webhooks.claimEvents(lease("c", later), later, 10)).toEqual([row]);
    });

    it("retires the events of a team without endpoints instead of handing them out", async () => {
      const lone = randomUUID();
      await store().webhooks.insertEndpoint(anEndpoint(teamId, now));
      const unsubscribed = [aRow(lone, now), aRow(lone, shifted(now, 1))];
      const subscribed = aRow(teamId, shifted(now, 2));
      for (const row of [...unsubscribed, subscribed])
        await store().consentLog.append(row, { event: "consent.given" });
      expect(await store().webhooks.claimEvents(lease("a"), shifted(now, 10), 10)).toEqual([
        subscribed,
      ]);
      // Retired, not leased: due again never, and the rows stay in the log.
      const later = shifted(now, 2 * MINUTE);
      expect(await store().webhooks.claimEvents(lease("b", later), later, 10)).toEqual([
        subscribed,
      ]);
      expect(await store().consentLog.list({ teamId: lone, limit: 10 })).toHaveLength(2);
    });

    it("fans an event out once, however often the fan-out repeats, and retires it", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      const row = aRow(teamId, now);
      await store().consentLog.append(row, { event: "consent.given" });
      const delivery = aDelivery(row, endpoint.id);
      expect(await store().webhooks.fanOut(row.id, [delivery])).toEqual([delivery]);
      expect(await store().webhooks.fanOut(row.id, [{ ...delivery, payload: "changed" }])).toEqual(
        [],
      );
      expect(await store().webhooks.claimEvents(lease("a"), shifted(now, 2 * MINUTE), 10)).toEqual(
        [],
      );
      const listed = await store().webhooks.listDeliveries({
        teamId,
        webhookId: endpoint.id,
        limit: 10,
      });
      expect(listed).toEqual([delivery]);
    });

    it("keeps no delivery of an endpoint removed before or during the fan-out", async () => {
      const kept = anEndpoint(teamId, now);
      const removed = anEndpoint(teamId, shifted(now, 1));
      for (const endpoint of [kept, removed]) await store().webhooks.insertEndpoint(endpoint);
      const first = aRow(teamId, now);
      await store().webhooks.fanOut(first.id, [aDelivery(first, removed.id)]);
      expect(await store().webhooks.deleteEndpoint(teamId, removed.id)).toBe(true);
      // A dispatcher that read both endpoints before the removal fans the next event out to both.
      const next = aRow(teamId, shifted(now, 1));
      const toKept = aDelivery(next, kept.id);
      const toRemoved = aDelivery(next, removed.id);
      expect(await store().webhooks.fanOut(next.id, [toKept, toRemoved])).toEqual([toKept]);
      expect(await store().webhooks.getDelivery(teamId, toRemoved.id)).toBeNull();
      expect(
        await store().webhooks.getDelivery(teamId, aDelivery(first, removed.id).id),
      ).toBeNull();
      const at = shifted(now, MINUTE);
      const claimed = await store().webhooks.claimDeliveries(lease("a", at), at, 10);
      expect(claimed.map((delivery) => delivery.id)).toEqual([toKept.id]);
    });

    it("stores a delivery leased at fan-out, due to others only when the lease ends", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      const row = aRow(teamId, now);
      const { owner, until } = lease("a");
      const leased = { ...aDelivery(row, endpoint.id), leaseOwner: owner, leaseUntil: until };
      expect(await store().webhooks.fanOut(row.id, [leased])).toEqual([leased]);
      expect(await store().webhooks.claimDeliveries(lease("b"), shifted(now, 1000), 10)).toEqual(
        [],
      );
      const result = aSucceededAttempt(now);
      expect(await store().webhooks.completeAttempt(leased.id, "a", 0, result)).toBe(true);
      expect(await store().webhooks.getDelivery(teamId, leased.id)).toMatchObject({
        status: "succeeded",
        attempts: 1,
      });
      // One whose holder never completes it is claimed by another once the lease has ended,
      // and the first holder can then no longer record an attempt.
      const other = aRow(teamId, shifted(now, 1));
      const abandoned = { ...aDelivery(other, endpoint.id), leaseOwner: owner, leaseUntil: until };
      expect(await store().webhooks.fanOut(other.id, [abandoned])).toEqual([abandoned]);
      const after = shifted(until, 1);
      const [taken] = await store().webhooks.claimDeliveries(lease("b", after), after, 10);
      expect(taken).toMatchObject({ id: abandoned.id, leaseOwner: "b", attempts: 0 });
      expect(await store().webhooks.completeAttempt(abandoned.id, "a", 0, result)).toBe(false);
    });

    it("takes over leases and retries set by a clock ahead of its own, as after a clock set back", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      const retriedRow = aRow(teamId, now);
      const leasedRow = aRow(teamId, shifted(now, 1));
      const nearRow = aRow(teamId, shifted(now, 2));
      const retried = aDelivery(retriedRow, endpoint.id);
      await store().webhooks.fanOut(retriedRow.id, [retried]);
      expect(await store().webhooks.claimDeliveries(lease("a"), now, 10)).toHaveLength(1);
      await store().webhooks.completeAttempt(retried.id, "a", 0, {
        attempts: 1,
        status: "pending",
        nextAttemptAt: shifted(now, 5_000),
        lastAttemptAt: now,
        lastError: "the endpoint answered 500",
      });
      // Leased at `now`; and by a clock a minute ahead of the one set back an hour.
      const back = shifted(now, -60 * MINUTE);
      const leased = {
        ...aDelivery(leasedRow, endpoint.id),
        leaseOwner: "a",
        leaseUntil: lease("a").until,
      };
      const near = {
        ...aDelivery(nearRow, endpoint.id),
        leaseOwner: "a",
        leaseUntil: shifted(back, 2 * MINUTE),
      };
      await store().webhooks.fanOut(leasedRow.id, [leased]);
      await store().webhooks.fanOut(nearRow.id, [near]);

      const [taken, ...more] = await store().webhooks.claimDeliveries(lease("b", back), back, 10);
      expect(more).toEqual([]);
      expect(taken).toMatchObject({ id: leased.id, leaseOwner: "b", nextAttemptAt: back });
      expect(
        await store().webhooks.completeAttempt(leased.id, "a", 0, {
          attempts: 1,
          status: "failed",
        }),
      ).toBe(false);
      expect(await store().webhooks.claimDeliveries(lease("c", back), back, 10)).toEqual([]);
      // Two days back: the retry too lies further ahead than any the schedule sets.
      const far = shifted(now, -2 * DAY);
      const overdue = await store().webhooks.claimDeliveries(lease("c", far), far, 10);
      expect(overdue.map((delivery) => delivery.id).sort()).toEqual(
        [retried.id, leased.id, near.id].sort(),
      );
      expect(overdue.find((delivery) => delivery.id === retried.id)).toMatchObject({
        leaseOwner: "c",
        attempts: 1,
        nextAttemptAt: far,
      });

      // Events: one leased at `now`, one appended then and not yet claimed.
      const appended = [aRow(teamId, shifted(now, 3)), aRow(teamId, shifted(now, 4))];
      for (const row of appended) await store().consentLog.append(row, { event: "consent.given" });
      expect(await store().webhooks.claimEvents(lease("a"), shifted(now, 10), 1)).toHaveLength(1);
      const claimed = await store().webhooks.claimEvents(lease("b", back), back, 10);
      expect(claimed.map((row) => row.id).sort()).toEqual(appended.map((row) => row.id).sort());
      expect(await store().webhooks.claimEvents(lease("c", back), back, 10)).toEqual([]);
    });

    it("lets racing claimers share due deliveries without overlap, and completes only under the lease", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      const rows = Array.from({ length: 6 }, (_, i) => aRow(teamId, shifted(now, i)));
      for (const row of rows) await store().webhooks.fanOut(row.id, [aDelivery(row, endpoint.id)]);
      const at = shifted(now, 1000);
      const [a, b] = await Promise.all([
        store().webhooks.claimDeliveries(lease("a", at), at, 6),
        store().webhooks.claimDeliveries(lease("b", at), at, 6),
      ]);
      const ids = [...a, ...b].map((d) => d.id);
      expect(new Set(ids).size).toBe(6);
      expect(ids).toHaveLength(6);
      const first = a[0] ?? (b[0] as DeliveryRecord);
      const other = first.leaseOwner === "a" ? "b" : "a";
      const result = aSucceededAttempt(at, 200);
      expect(await store().webhooks.completeAttempt(first.id, other, 0, result)).toBe(false);
      expect(
        await store().webhooks.completeAttempt(first.id, first.leaseOwner as string, 0, result),
      ).toBe(true);
      const stored = await store().webhooks.getDelivery(teamId, first.id);
      expect(stored).toMatchObject({ status: "succeeded", attempts: 1, lastStatusCode: 200 });
      expect(stored?.leaseOwner).toBeUndefined();
      // Nothing is due while the leases run; once they end, the five uncompleted ones are.
      expect(await store().webhooks.claimDeliveries(lease("c", at), shifted(at, 1000), 10)).toEqual(
        [],
      );
      const later = shifted(at, 2 * MINUTE);
      expect(await store().webhooks.claimDeliveries(lease("c", later), later, 10)).toHaveLength(5);
    });

    it("claims no more of an endpoint's deliveries than the caller has room for", async () => {
      const busy = anEndpoint(teamId, now);
      const half = anEndpoint(teamId, shifted(now, 1));
      const free = anEndpoint(teamId, shifted(now, 2));
      for (const endpoint of [busy, half, free]) await store().webhooks.insertEndpoint(endpoint);
      // Three due deliveries for each endpoint, oldest first: busy, half, free, busy, half, ...
      await dueInOrder([busy, half, free, busy, half, free, busy, half, free]);
      const at = shifted(now, 1000);
      const inFlight = [busy.id, busy.id, half.id].map((webhookId) => ({ webhookId, teamId }));
      const room = { perEndpoint: 2, perTeam: 10, inFlight };
      const claimed = await store().webhooks.claimDeliveries(lease("a", at), at, 10, room);
      expect(claimed.map((d) => d.webhookId)).toEqual([half.id, free.id, free.id]);
      const later = await store().webhooks.claimDeliveries(lease("b", at), at, 10);
      expect(later.map((d) => d.webhookId)).toEqual([
        busy.id,
        busy.id,
        half.id,
        busy.id,
        half.id,
        free.id,
      ]);
    });

    it("reaches deliveries with room behind a backlog of a full endpoint's, within a few claims", async () => {
      const other = randomUUID();
      const hung = anEndpoint(teamId, now);
      const waiting = Array.from({ length: 10 }, (_, i) => anEndpoint(other, shifted(now, i)));
      for (const endpoint of [hung, ...waiting]) await store().webhooks.insertEndpoint(endpoint);
      /** One due delivery of `webhookId` per time, stored 250 at a time. */
      async function dueAt(times: number[], webhookId: (i: number) => string, team: string) {
        const rows = times.map((ms) => aRow(team, shifted(now, ms)));
        for (let i = 0; i < rows.length; i += 250) {
          await Promise.all(
            rows
              .slice(i, i + 250)
              .map((row, j) => store().webhooks.fanOut(row.id, [aDelivery(row, webhookId(i + j))])),
          );
        }
      }
      const range = (from: number, count: number) =>
        Array.from({ length: count }, (_, i) => from + i);
      // 1,200 due deliveries of the hung endpoint, one for each of ten others, 1,300 more hung.
      await dueAt(range(0, 1_200), () => hung.id, teamId);
      await dueAt(range(1_200, 10), (i) => waiting[i]?.id ?? "", other);
      await dueAt(range(1_210, 1_300), () => hung.id, teamId);
      const at = shifted(now, 10_000);
      // The hung endpoint's one connection is taken: none of its deliveries may be claimed.
      const room = { perEndpoint: 1, perTeam: 10, inFlight: [{ webhookId: hung.id, teamId }] };
      const claimed: string[] = [];
      for (let call = 0; call < 2 && claimed.length < waiting.length; call++) {
        const batch = await store().webhooks.claimDeliveries(lease("a", at), at, 5, room);
        claimed.push(...batch.map((delivery) => delivery.webhookId));
      }
      expect(claimed).toEqual(waiting.map((endpoint) => endpoint.id));
    });

    it("claims no more of a team's deliveries than the caller has room for", async () => {
      const other = randomUUID();
      const [first, second] = [anEndpoint(teamId, now), anEndpoint(teamId, shifted(now, 1))];
      const theirs = anEndpoint(other, now);
      for (const endpoint of [first, second, theirs])
        await store().webhooks.insertEndpoint(endpoint);
      // Two due deliveries for each of the team's endpoints, then one for the other team's.
      await dueInOrder([first, second, first, second, theirs]);
      const at = shifted(now, 1000);
      const room = {
        perEndpoint: 10,
        perTeam: 3,
        inFlight: [{ webhookId: randomUUID(), teamId }],
      };
      const claimed = await store().webhooks.claimDeliveries(lease("a", at), at, 10, room);
      expect(claimed.map((d) => d.teamId)).toEqual([teamId, teamId, other]);
      const later = await store().webhooks.claimDeliveries(lease("b", at), at, 10);
      expect(later.map((d) => d.teamId)).toEqual([teamId, teamId]);
    });

    it("schedules a retry at nextAttemptAt and replays dead letters", async () => {
      const endpoint = anEndpoint(teamId, now);
      await store().webhooks.insertEndpoint(endpoint);
      const row = aRow(teamId, now);
      const delivery = aDelivery(row, endpoint.id);
      await store().webhooks.fanOut(row.id, [delivery]);
      const [claimed] = await store().webhooks.claimDeliveries(lease("a"), now, 1);
      const retryAt = shifted(now, 5000);
      await store().webhooks.completeAttempt(delivery.id, "a", 0, {
        attempts: 1,
        status: "pending",
        nextAttemptAt: retryAt,
        lastAttemptAt: now,
        lastStatusCode: 500,
        lastError: "the endpoint answered 500",
      });
      expect(claimed?.id).toBe(delivery.id);
      expect(await store().webhooks.claimDeliveries(lease("a"), shifted(retryAt, -1), 1)).toEqual(
        [],
      );
      const [again] = await store().webhooks.claimDeliveries(lease("a", retryAt), retryAt, 1);
      await store().webhooks.completeAttempt(delivery.id, "a", 1, {
        attempts: 2,
        status: "failed",
        lastAttemptAt: retryAt,
        lastError: "gone",
      });
      expect(again?.attempts).toBe(1);
      expect(
        await store().webhooks.listDeliveries({
          teamId,
          webhookId: endpoint.id,
          status: "failed",
          limit: 5,
        }),
      ).toHaveLength(1);
      expect(
        await store().webhooks.replay(
          teamId,
          endpoint.id,
          { failedSince: shifted(now, MINUTE) },
          retryAt,
        ),
      ).toBe(0);
      expect(
        await store().webhooks.replay(randomUUID(), endpoint.id, { failedSince: now }, retryAt),
      ).toBe(0);
      expect(
        await store().webhooks.replay(teamId, endpoint.id, { failedSince: now }, retryAt),
      ).toBe(1);
      const replayed = await store().webhooks.getDelivery(teamId, delivery.id);
      expect(replayed).toMatchObject({ status: "pending", attempts: 0, nextAttemptAt: retryAt });
      expect(await store().webhooks.claimDeliveries(lease("b", retryAt), retryAt, 1)).toHaveLength(
        1,
      );
    });
  });
}
