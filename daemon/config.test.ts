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

describe("numeric settings", () => {
  it("read ports as decimal whole numbers, spaces around allowed", () => {
    expect(loadConfig({ CONSENT_HTTP_PORT: " 8081 " }).httpPort).toBe(8081);
    expect(loadConfig({ CONSENT_GRPC_PORT: "0" }).grpcPort).toBe(0);
  });

  it("refuse what Number() would accept but is not written as a whole number", () => {
    for (const value of ["0x50", "1e3", "80.0", "65536", "-1", "eighty"]) {
      expect(() => loadConfig({ CONSENT_HTTP_PORT: value })).toThrow(
        `CONSENT_HTTP_PORT must be a port number from 0 to 65535, not "${value}"`,
      );
    }
  });
});
