import { describe, expect, it } from "vitest";
import { isoTimeMs } from "#daemon/validation/patterns.js";
import { isIsoDateTime, isoInstant } from "#daemon/validation/rules.js";

describe("isIsoDateTime", () => {
  it("knows the leap days of years 0-99, which Date.UTC reads as 1900-1999", () => {
    const leapDay = (year: string) => isIsoDateTime(`${year}-02-29T00:00:00Z`);
    expect(["0000", "0004", "0096", "0400", "2000", "2028"].map(leapDay)).toEqual(
      Array(6).fill(true),
    );
    expect(["0001", "0099", "0100", "1900", "2026"].map(leapDay)).toEqual(Array(5).fill(false));
    expect(isIsoDateTime("0000-01-01T00:00:00+01:00")).toBe(true);
    expect(isIsoDateTime("0050-04-31T00:00:00Z")).toBe(false);
  });
});

describe("isoInstant", () => {
  it("keeps all nine fractional digits and reads offsets as the same instant in UTC", () => {
    expect(isoInstant("2026-11-22T08:00:00.0001Z") - isoInstant("2026-11-22T08:00:00Z")).toBe(
      100_000n,
    );
    expect(isoInstant("2026-11-22T09:00:00.000000001+01:00")).toBe(
      isoInstant("2026-11-22T08:00:00.000000001Z"),
    );
    expect(isoInstant("1970-01-01T00:00:00.5Z")).toBe(500_000_000n);
    expect(isoInstant("1969-12-31T23:59:59.999999999Z")).toBe(-1n);
  });
});

describe("isoTimeMs (the banner runtime's reading of a date-time)", () => {
  it("reads every form the rule accepts as Date reads its canonical one, and nothing else", () => {
    const at = Date.parse("2026-11-22T08:00:00.120Z");
    for (const form of [
      "2026-11-22T08:00:00.12Z",
      "2026-11-22t08:00:00.120z",
      "2026-11-22T08:00:00.120999999Z",
      "2026-11-22T09:00:00.12+01:00",
    ]) {
      expect([form, isoTimeMs(form)]).toEqual([form, at]);
    }
    expect(isoTimeMs("2026-11-22T08:00:00Z")).toBe(Date.parse("2026-11-22T08:00:00.000Z"));
    for (const other of ["2026-11-22", "2026-11-22T08:00Z", "2026-11-22 08:00:00Z", "soon"]) {
      expect([other, isoTimeMs(other)]).toEqual([other, Number.NaN]);
    }
  });
});
