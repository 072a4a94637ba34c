import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { createLogIdGenerator, idMillis } from "#daemon/consent-log/consent-log-rules.js";

const AT = new Date("2026-11-27T12:00:00.000Z");
const HOUR = 3_600_000;

describe("createLogIdGenerator: consentLogIds in the order rows are written", () => {
  it("rises within one millisecond and when the clock steps back, never below the receipt", () => {
    const ids = createLogIdGenerator();
    const taken = [ids.next(AT), ids.next(AT), ids.next(new Date(AT.getTime() - HOUR))];
    expect(taken.toSorted()).toEqual(taken);
    expect(new Set(taken).size).toBe(3);
    expect(idMillis(ids.next(new Date(AT.getTime() + 1)))).toBe(AT.getTime() + 1);
  });

  it("goes above an id it is raised to, in that id's millisecond, however far ahead of the clock", () => {
    const ids = createLogIdGenerator();
    ids.next(AT);
    const ahead = uuidv7({ msecs: AT.getTime() + HOUR, seq: 0xfffffff0 });
    ids.raise(ahead);
    const next = ids.next(AT);
    expect(next > ahead).toBe(true);
    expect(idMillis(next)).toBe(AT.getTime() + HOUR);
    // A counter at its end moves on to the next millisecond.
    const last = uuidv7({ msecs: AT.getTime() + 2 * HOUR, seq: 0xffffffff });
    ids.raise(last);
    const after = ids.next(AT);
    expect(after > last).toBe(true);
    expect(idMillis(after)).toBe(AT.getTime() + 2 * HOUR + 1);
  });

  it("keeps to its clock when raised to an id it has passed", () => {
    const ids = createLogIdGenerator();
    const own = ids.next(AT);
    ids.raise(uuidv7({ msecs: AT.getTime() - HOUR }));
    const next = ids.next(new Date(AT.getTime() + 5));
    expect(next > own).toBe(true);
    expect(idMillis(next)).toBe(AT.getTime() + 5);
  });
});
