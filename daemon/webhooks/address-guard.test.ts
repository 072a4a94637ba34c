import { describe, expect, it } from "vitest";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";

/** The guard on addresses as Node reports them (dns.lookup answers), not only URL literals. */
describe("AddressGuard.refusalOf", () => {
  const guard = new AddressGuard([]);

  it.each([
    ["8.8.8.8", null],
    ["2606:4700::1111", null],
    ["::1", /is a loopback address;/],
    ["::", /is an unspecified address;/],
    ["::ffff:127.0.0.1", /is a loopback address;/],
    ["::ffff:8.8.8.8", null],
    // Node writes an IPv4-compatible answer dotted: it must stay IPv6, and be refused.
    ["::8.8.8.8", /is an IPv4-compatible IPv6 address;/],
    ["::127.0.0.1", /is an IPv4-compatible IPv6 address;/],
    ["::7f00:1", /is an IPv4-compatible IPv6 address;/],
    ["::0.0.0.2", /is an IPv4-compatible IPv6 address;/],
    ["::300.1.1.1", /is not an IP address/],
    ["192.0.0.170", /is a .* address;/],
  ])("%s → %s", (address, refusal) => {
    const answer = guard.refusalOf(address);
    if (refusal === null) expect(answer).toBeNull();
    else expect(answer).toMatch(refusal);
  });

  it("never counts an IPv4-compatible address as the allow-listed IPv4 it names", () => {
    const allowing = new AddressGuard(["127.0.0.1"]);
    expect(allowing.isAllowListed("127.0.0.1")).toBe(true);
    expect(allowing.isAllowListed("::ffff:127.0.0.1")).toBe(true);
    expect(allowing.isAllowListed("::127.0.0.1")).toBe(false);
    expect(allowing.refusalOf("::127.0.0.1", true)).toMatch(/plain http is only allowed/);
  });
});

describe("AddressGuard.lookup", () => {
  const guard = new AddressGuard([]);
  const lookUp = (hostname: string) =>
    new Promise<Error | null>((resolve) => guard.lookup(false)(hostname, {}, resolve));

  it("tells a name the resolver refuses to look up as one that resolves nowhere", async () => {
    // A label over 63 characters: getaddrinfo answers EINVAL, not ENOTFOUND.
    const overlong = `${"a".repeat(300)}.example`;
    const [refused, nowhere] = await Promise.all([lookUp(overlong), lookUp("nowhere.invalid")]);
    expect(refused?.message).toBe(
      `${overlong} resolves to no address this service may reach; webhooks are only delivered to public addresses`,
    );
    expect(nowhere?.message).toBe(
      "nowhere.invalid resolves to no address this service may reach; webhooks are only delivered to public addresses",
    );
  });
});
