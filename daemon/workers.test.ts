import { describe, expect, it } from "vitest";
import { workerCount, workerTimeoutMs } from "#daemon/workers.js";

describe("CONSENT_WORKERS (npm start's daemon + gateway processes)", () => {
  it("defaults to one process", () => {
    expect(workerCount({})).toBe(1);
    expect(workerCount({ CONSENT_WORKERS: "" })).toBe(1);
  });

  it("takes a whole number from 1 to 64", () => {
    expect(workerCount({ CONSENT_WORKERS: "1" })).toBe(1);
    expect(workerCount({ CONSENT_WORKERS: "4" })).toBe(4);
    expect(workerCount({ CONSENT_WORKERS: "64" })).toBe(64);
  });

  it("refuses anything else with a ConfigError naming the variable", () => {
    for (const value of ["0", "-1", "1.5", "two", "65"]) {
      expect(() => workerCount({ CONSENT_WORKERS: value })).toThrow(
        expect.objectContaining({
          name: "ConfigError",
          message: expect.stringContaining("CONSENT_WORKERS"),
        }),
      );
    }
  });
});

describe("CONSENT_WORKER_TIMEOUT_MS (how long a silent worker is tolerated)", () => {
  it("defaults to 15 seconds", () => {
    expect(workerTimeoutMs({})).toBe(15_000);
  });

  it("takes whole milliseconds from 1 s to an hour, and refuses anything else", () => {
    expect(workerTimeoutMs({ CONSENT_WORKER_TIMEOUT_MS: "2000" })).toBe(2_000);
    for (const value of ["999", "3600001", "2e3", "15s"]) {
      expect(() => workerTimeoutMs({ CONSENT_WORKER_TIMEOUT_MS: value })).toThrow(
        expect.objectContaining({
          name: "ConfigError",
          message: expect.stringContaining("CONSENT_WORKER_TIMEOUT_MS"),
        }),
      );
    }
  });
});
