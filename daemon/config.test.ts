import { describe, expect, it } from "vitest";
import { loadConfig } from "#daemon/config.js";

describe("CONSENT_WEBHOOK_LEASE_MS", () => {
  it("is unset by default (the dispatcher's 60 s) and read as whole milliseconds", () => {
    expect(loadConfig({}).webhookLeaseMs).toBeUndefined();
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "" }).webhookLeaseMs).toBeUndefined();
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "2000" }).webhookLeaseMs).toBe(2000);
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "1000" }).webhookLeaseMs).toBe(1000);
    expect(loadConfig({ CONSENT_WEBHOOK_LEASE_MS: "3600000" }).webhookLeaseMs).toBe(3_600_000);
  });

  it("refuses anything but a whole number from 1000 to 3600000, naming the variable", () => {
    for (const value of ["999", "3600001", "2s", "1.5e3", "-5000"]) {
      expect(() => loadConfig({ CONSENT_WEBHOOK_LEASE_MS: value })).toThrow(
        /^CONSENT_WEBHOOK_LEASE_MS must be a whole number of milliseconds from 1000 to 3600000/,
      );
    }
  });
});
