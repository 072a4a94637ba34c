import { InvalidArgumentError } from "commander";
import { describe, expect, it } from "vitest";
import {
  durationIn,
  formatDuration,
  integerIn,
  parseDaemonUrl,
  parseDuration,
  parseIsoDateTime,
  parseList,
  parseTimeBound,
} from "#cli/option-parsers.js";

describe("option parsers", () => {
  it("reads durations with units, compound durations and 0", () => {
    expect(parseDuration("0")).toBe(0);
    expect(parseDuration("30s")).toBe(30);
    expect(parseDuration("30m")).toBe(1800);
    expect(parseDuration("24h")).toBe(86_400);
    expect(parseDuration("7d")).toBe(604_800);
    expect(parseDuration("1h30m")).toBe(5400);
  });

  it("refuses bare numbers, unknown units and overflowing durations", () => {
    for (const value of ["10", "1w", "h", "-1h", "1.5h", "", "99999999999d"]) {
      expect(() => parseDuration(value), value).toThrow(InvalidArgumentError);
    }
  });

  it("reads a duration within a range, naming the range in its own units", () => {
    const ttl = durationIn(60, 30 * 86_400);
    expect([ttl("1m"), ttl("30d"), ttl("12h")]).toEqual([60, 2_592_000, 43_200]);
    expect(() => ttl("59s")).toThrow('"59s" is out of range: from 1m to 30d.');
    expect(() => ttl("30d1s")).toThrow(InvalidArgumentError);
    // A range without 0 does not suggest it; one with 0 does.
    expect(() => ttl("abc")).toThrow("e.g. 24h, 30m or 7d.");
    expect(() => durationIn(0, 86_400)("abc")).toThrow("e.g. 24h, 30m, 7d, or 0.");
  });

  it("formats seconds in the largest exact unit", () => {
    expect([0, 45, 90 * 60, 86_400, 3 * 86_400].map(formatDuration)).toEqual([
      "0",
      "45s",
      "90m",
      "1d",
      "3d",
    ]);
  });

  it("reads ISO 8601 date-times only with a zone", () => {
    expect(parseIsoDateTime("2026-12-31T23:59:59Z").toISOString()).toBe("2026-12-31T23:59:59.000Z");
    expect(parseIsoDateTime("2026-12-31T23:59+02:00").toISOString()).toBe(
      "2026-12-31T21:59:00.000Z",
    );
    for (const value of ["2026-12-31", "2026-12-31T23:59:59", "tomorrow", "2026-13-01T00:00:00Z"]) {
      expect(() => parseIsoDateTime(value), value).toThrow(InvalidArgumentError);
    }
  });

  // Regression: `new Date` rolled these over (2027-02-30 → March 2, 24:00 → the next day) and
  // `keys create --expires-at` stored the shifted time.
  it("refuses impossible days and 24:00 instead of moving them to another day", () => {
    for (const value of [
      "2027-02-30T00:00:00Z",
      "2027-04-31T10:00:00+02:00",
      "2026-12-01T24:00:00Z",
      "2026-02-29T00:00:00Z",
      "2026-01-31T12:60:00Z",
      "2026-01-31T12:00:60Z",
      "2026-01-31T12:00:00+24:00",
    ]) {
      expect(() => parseIsoDateTime(value), value).toThrow(/not an ISO 8601 date-time .* real/);
    }
    expect(parseIsoDateTime("2028-02-29T00:00:00Z").toISOString()).toBe("2028-02-29T00:00:00.000Z");
  });

  it("reads comma lists without blanks or repeats", () => {
    expect(parseList(" banners:read, consent:read,,banners:read ")).toEqual([
      "banners:read",
      "consent:read",
    ]);
    expect(() => parseList(" , ")).toThrow(InvalidArgumentError);
  });

  it("reads the daemon's http(s) address without a trailing slash, and nothing more", () => {
    expect(parseDaemonUrl("http://127.0.0.1:50051/")).toBe("http://127.0.0.1:50051");
    expect(() => parseDaemonUrl("127.0.0.1:50051")).toThrow(InvalidArgumentError);
    expect(() => parseDaemonUrl("ftp://host")).toThrow(InvalidArgumentError);
    expect(() => parseDaemonUrl("http://127.0.0.1:99999")).toThrow(
      '"http://127.0.0.1:99999" names port 99999; a port is a number from 1 to 65535.',
    );
    // A refused URL is quoted without its password.
    expect(() => parseDaemonUrl("ftp://u:secret@host")).toThrow(
      '"ftp://***@host" must be an http:// or https:// URL.',
    );
    expect(() => parseDaemonUrl("http://u:secret@127.0.0.1:99999")).toThrow(
      '"http://***@127.0.0.1:99999" names port 99999; a port is a number from 1 to 65535.',
    );
    // The daemon serves at the root: a path would have every call answered 404.
    for (const value of [
      "http://127.0.0.1:50051/consent",
      "http://h:1/?a=1",
      "http://u:secret@h:1",
    ]) {
      expect(() => parseDaemonUrl(value)).toThrow(
        "The daemon URL must be the daemon's address alone (scheme, host and port, such as http://127.0.0.1:50051): the daemon serves at the root, so a path, query, fragment or user name has no place in it.",
      );
    }
  });

  it("reads a time bound as a zoned date-time or as a duration before now", () => {
    const now = new Date("2026-05-02T00:00:00Z");
    expect(parseTimeBound("24h", now)).toEqual(new Date("2026-05-01T00:00:00Z"));
    expect(parseTimeBound("1d12h", now)).toEqual(new Date("2026-04-30T12:00:00Z"));
    expect(parseTimeBound("2026-01-01T00:00:00Z", now)).toEqual(new Date("2026-01-01T00:00:00Z"));
    for (const bad of ["yesterday", "2026-01-01", "10"]) {
      expect(() => parseTimeBound(bad, now)).toThrow(InvalidArgumentError);
    }
    expect(() => parseTimeBound("2026-02-30T00:00:00Z", now)).toThrow(/real calendar day/);
  });

  it("reads whole numbers within bounds", () => {
    expect(integerIn(1, 1000)("50")).toBe(50);
    for (const bad of ["0", "1001", "1.5", "ten", ""]) {
      expect(() => integerIn(1, 1000)(bad)).toThrow(InvalidArgumentError);
    }
  });
});
