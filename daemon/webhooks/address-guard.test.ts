import { describe, expect, it, vi } from "vitest";
import {
  AddressGuard,
  MAX_LOOKUPS,
  MAX_LOOKUPS_PER_TENANT,
  type Resolver,
} from "#daemon/webhooks/address-guard.js";
import { DELIVERY_TIMEOUT_MS } from "#daemon/webhooks/webhook-sender.js";

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

describe("AddressGuard lookups at once", () => {
  /** A resolver whose answers are held until the test gives them: public addresses. */
  function heldResolver() {
    const held: { hostname: string; answer: () => void }[] = [];
    const resolver: Resolver = (hostname, _options, callback) => {
      held.push({
        hostname,
        answer: () => callback(null, [{ address: "93.184.215.14", family: 4 }]),
      });
    };
    return { held, resolver };
  }
  const lookUp = (guard: AddressGuard, hostname: string, tenant?: string) =>
    new Promise<{ error: Error | null; address: string }>((resolve) =>
      guard.lookup(false, tenant)(hostname, {}, (error, address) =>
        resolve({ error, address: address as string }),
      ),
    );

  it(`runs at most ${MAX_LOOKUPS}, so names whose DNS never answers hold no more of the thread pool; the others run as those end`, async () => {
    const { held, resolver } = heldResolver();
    const guard = new AddressGuard([], resolver);
    const names = ["hangs-1.example", "hangs-2.example", "ok-3.example", "ok-4.example"];
    // Each of its own team: the bound in all, not a team's.
    const answers = names.map((name) => lookUp(guard, name, name));
    expect(held.map((call) => call.hostname)).toEqual(names.slice(0, MAX_LOOKUPS));
    held[0]?.answer();
    expect((await answers[0])?.address).toBe("93.184.215.14");
    expect(held.map((call) => call.hostname)).toEqual(names.slice(0, MAX_LOOKUPS + 1));
    held[2]?.answer();
    expect((await answers[2])?.address).toBe("93.184.215.14");
    expect(held.map((call) => call.hostname)).toEqual(names);
    held[3]?.answer();
    held[1]?.answer();
    expect((await Promise.all(answers)).map((answer) => answer.error)).toEqual(
      names.map(() => null),
    );
  });

  it(`runs at most ${MAX_LOOKUPS_PER_TENANT} of one team's, so a team whose DNS hangs leaves the other teams room`, async () => {
    const { held, resolver } = heldResolver();
    const guard = new AddressGuard([], resolver);
    const answers = [
      lookUp(guard, "hangs-1.evil.example", "team-a"),
      lookUp(guard, "hangs-2.evil.example", "team-a"),
      lookUp(guard, "hangs-3.evil.example", "team-a"),
      lookUp(guard, "shop-1.example", "team-b"),
    ];
    // Team B's lookup runs past team A's waiting ones, in the room team A cannot take.
    expect(held.map((call) => call.hostname)).toEqual(["hangs-1.evil.example", "shop-1.example"]);
    held[1]?.answer();
    expect((await answers[3])?.error).toBeNull();
    const later = lookUp(guard, "shop-2.example", "team-b");
    expect(held.map((call) => call.hostname)).toEqual([
      "hangs-1.evil.example",
      "shop-1.example",
      "shop-2.example",
    ]);
    held[2]?.answer();
    expect((await later).error).toBeNull();
    // Team A's next goes on once its own has ended, in turn.
    held[0]?.answer();
    expect(held.map((call) => call.hostname).slice(3)).toEqual(["hangs-2.evil.example"]);
    held[3]?.answer();
    expect(held.map((call) => call.hostname).slice(4)).toEqual(["hangs-3.evil.example"]);
    held[4]?.answer();
    expect((await Promise.all(answers)).map((answer) => answer.error)).toEqual([
      null,
      null,
      null,
      null,
    ]);
  });

  it("fails unrun a lookup that waited longer than an attempt lasts, telling it as a name out of reach", async () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    try {
      const { held, resolver } = heldResolver();
      const guard = new AddressGuard([], resolver);
      const running = ["hangs-1.example", "hangs-2.example"].map((name) =>
        lookUp(guard, name, name),
      );
      const late = lookUp(guard, "late.example", "late");
      vi.advanceTimersByTime(DELIVERY_TIMEOUT_MS + 1);
      const fresh = lookUp(guard, "fresh.example", "fresh");
      held[0]?.answer();
      expect((await late).error?.message).toBe(
        "late.example resolves to no address this service may reach; webhooks are only delivered to public addresses",
      );
      // The turn goes on to the next lookup still worth running.
      expect(held.map((call) => call.hostname)).toEqual([
        "hangs-1.example",
        "hangs-2.example",
        "fresh.example",
      ]);
      held[1]?.answer();
      held[2]?.answer();
      expect((await fresh).error).toBeNull();
      await Promise.all(running);
    } finally {
      vi.useRealTimers();
    }
  });
});
