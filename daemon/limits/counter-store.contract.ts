import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  aheadOfTtlMonitor,
  DAY,
  MINUTE,
  type OpenStore,
  shifted,
  useFreshStore,
} from "#daemon/store/store-contract-harness.js";

function aCounterName(): string {
  return `consent:pb_1:${randomUUID()}`;
}

/** The CounterStore promises (daemon/limits/counter-store.ts), for any adapter. */
export function describeCounterStoreContract(openStore: OpenStore): void {
  describe("CounterStore contract", () => {
    const store = useFreshStore(openStore);
    const now = aheadOfTtlMonitor();
    const window = shifted(now, DAY);

    it("starts a new counter at 0 and returns the count after each increment", async () => {
      const name = aCounterName();
      expect(await store().counters.get(name, now)).toBe(0);
      expect(await store().counters.increment(name, window, now)).toBe(1);
      expect(await store().counters.increment(name, window, now)).toBe(2);
      expect(await store().counters.get(name, now)).toBe(2);
    });

    it("never loses one of 200 concurrent increments", async () => {
      const name = aCounterName();
      const counts = await Promise.all(
        Array.from({ length: 200 }, () => store().counters.increment(name, window, now)),
      );
      expect(counts.toSorted((a, b) => a - b)).toEqual(
        Array.from({ length: 200 }, (_, i) => i + 1),
      );
      expect(await store().counters.get(name, now)).toBe(200);
    });

    it("counts an expired counter as 0", async () => {
      const name = aCounterName();
      await store().counters.increment(name, window, now);
      expect(await store().counters.get(name, window)).toBe(0);
      expect(await store().counters.get(name, shifted(window, MINUTE))).toBe(0);
    });

    it("restarts an expired counter at 1 with the new expiry", async () => {
      const name = aCounterName();
      // Expired when made: the window lies before `now`.
      await store().counters.increment(name, shifted(now, -MINUTE), now);
      await store().counters.increment(name, shifted(now, -MINUTE), now);
      expect(await store().counters.increment(name, window, now)).toBe(1);
      expect(await store().counters.increment(name, shifted(window, MINUTE), now)).toBe(2);
      expect(await store().counters.get(name, now)).toBe(2);
      expect(await store().counters.get(name, window)).toBe(0); // the restart's expiry holds
    });

    it("purges counters expired at or before now and counts them", async () => {
      const [expired, expiringNow, live] = [aCounterName(), aCounterName(), aCounterName()];
      await store().counters.increment(expired, shifted(now, -MINUTE), now);
      await store().counters.increment(expiringNow, now, now);
      await store().counters.increment(live, window, now);
      expect(await store().counters.purgeExpired(now)).toBe(2);
      expect(await store().counters.purgeExpired(now)).toBe(0);
      expect(await store().counters.get(live, now)).toBe(1);
      expect(await store().counters.get(expired, shifted(now, -2 * MINUTE))).toBe(0);
    });

    it("purges in one call however many expired together, a live one among them kept", async () => {
      // More than the embedded store removes in one transaction (PURGE_BATCH), in one millisecond.
      const names = Array.from({ length: 2_500 }, aCounterName);
      await Promise.all(names.map((name) => store().counters.increment(name, now, now)));
      const live = aCounterName();
      await store().counters.increment(live, window, now);
      expect(await store().counters.purgeExpired(now)).toBe(2_500);
      expect(await store().counters.purgeExpired(now)).toBe(0);
      expect(await store().counters.get(live, now)).toBe(1);
    });
  });
}
