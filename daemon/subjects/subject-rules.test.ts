import { describe, expect, it } from "vitest";
import { addMonths, recordExpiry } from "#daemon/subjects/subject-rules.js";

const at = (iso: string) => new Date(iso);

describe("decisions §4: a record's months", () => {
  it("keeps the day and time of the write when the month has it", () => {
    expect(addMonths(at("2026-11-22T10:30:00.000Z"), 13)).toEqual(at("2027-12-22T10:30:00.000Z"));
    expect(addMonths(at("2027-03-31T23:59:59.999Z"), 25)).toEqual(at("2029-04-30T23:59:59.999Z"));
  });

  it("ends at the last day of a shorter month, never in the month after", () => {
    // 2027-01-31: 13 months is February 2028 (a leap year), 25 months February 2029.
    const now = at("2027-01-31T12:00:00.000Z");
    expect(recordExpiry(undefined, now)).toEqual(at("2028-02-29T12:00:00.000Z"));
    expect(recordExpiry("2040-01-01T00:00:00Z", now)).toEqual(at("2029-02-28T12:00:00.000Z"));
    expect(addMonths(at("2026-08-31T00:00:00.000Z"), 13)).toEqual(at("2027-09-30T00:00:00.000Z"));
  });
});
