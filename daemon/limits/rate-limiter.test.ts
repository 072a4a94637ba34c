import { describe, expect, it } from "vitest";
import { clientOfIp, rateLimited } from "#daemon/limits/rate-limiter.js";

describe("clientOfIp", () => {
  it("counts an IPv4 address alone, however it is written", () => {
    expect(clientOfIp("192.0.2.7")).toBe("192.0.2.7");
    expect(clientOfIp("::ffff:192.0.2.7")).toBe("192.0.2.7");
    expect(clientOfIp("::ffff:c000:207")).toBe("192.0.2.7");
  });

  it("counts an IPv6 address by its /64, however it is written", () => {
    const client = clientOfIp("2001:db8:1:2::1");
    expect(client).toBe("2001:db8:1:2::/64");
    expect(clientOfIp("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe(client);
    expect(clientOfIp("2001:DB8:1:2:0:0:0:9")).toBe(client);
    expect(clientOfIp("2001:db8:1:3::1")).not.toBe(client);
    // The IPv4-compatible form is an IPv6 address, however written; not the IPv4 host.
    expect(clientOfIp("::192.0.2.7")).toBe(clientOfIp("::c000:207"));
    expect(clientOfIp("::192.0.2.7")).not.toBe("192.0.2.7");
    expect(clientOfIp("fe80::1%eth0")).toBe(clientOfIp("fe80::2"));
    expect(clientOfIp("::192.0.2.7%ffff")).toBe(clientOfIp("::192.0.2.7"));
  });

  it("keeps anything that is not an address as it is", () => {
    expect(clientOfIp("unknown")).toBe("unknown");
  });
});

describe("rateLimited", () => {
  it("says when to retry in words that fit the number", () => {
    expect(rateLimited(1).message).toBe("Rate limit exceeded; retry in 1 second");
    expect(rateLimited(42, { what: "Too many" }).message).toBe("Too many; retry in 42 seconds");
  });
});
