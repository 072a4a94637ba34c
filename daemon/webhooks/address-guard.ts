import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from "node:dns";
import type { LookupFunction } from "node:net";
import ipaddr from "ipaddr.js";
import { InFlightCounts } from "#daemon/limits/in-flight-counts.js";
import { DELIVERY_TIMEOUT_MS } from "#daemon/webhooks/webhook-sender.js";

/** What the guard resolves host names with: dns.lookup's form, every address asked for. */
export type Resolver = (
  hostname: string,
  options: LookupAllOptions,
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/**
 * Host-name lookups the guard has running at once. dns.lookup (getaddrinfo) holds one of
 * libuv's threads, 4 unless UV_THREADPOOL_SIZE says more, for as long as the resolver takes:
 * endpoints naming hosts whose DNS never answers would otherwise hold every thread, stalling the
 * process's file work, compression (the loader's builds) and the other teams' lookups. The rest
 * wait in turn.
 */
export const MAX_LOOKUPS = 2;
/**
 * Of those, the lookups of one tenant (a team) at most: a team whose endpoints' DNS hangs holds
 * one, and the other teams' lookups go on in the other.
 */
export const MAX_LOOKUPS_PER_TENANT = 1;

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Cidr = [Address, number];

/** Raised when a delivery would reach an address the guard refuses (SSRF). */
export class RefusedAddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RefusedAddressError";
  }
}

/** Why an address is refused, in every message that refuses one. */
const PUBLIC_ONLY = "webhooks are only delivered to public addresses";
const HTTP_ONLY_ALLOW_LISTED =
  "plain http is only allowed to addresses in CONSENT_WEBHOOK_ALLOW_CIDRS";

/** Cloud metadata endpoints, refused by name in the messages (their ranges are refused anyway). */
const METADATA = new Set(["169.254.169.254", "fd00:ec2::254"]);

/** ipaddr.js range names as the guard's messages say them. */
const RANGE_NAMES: Readonly<Record<string, string>> = {
  unspecified: "an unspecified address",
  broadcast: "a broadcast address",
  multicast: "a multicast address",
  linkLocal: "a link-local address",
  loopback: "a loopback address",
  carrierGradeNat: "a carrier-grade NAT address",
  private: "a private address",
  reserved: "a reserved address",
  uniqueLocal: "a unique local address",
  deprecatedSiteLocal: "a site-local address",
  discard: "a discard-only address",
  rfc6145: "an IPv4-translated address",
  rfc6052: "an IPv4/IPv6 translation address",
  "6to4": "a 6to4 address",
  teredo: "a Teredo address",
  benchmarking: "a benchmarking address",
  amt: "an AMT relay address",
  as112: "an AS112 address",
  as112v6: "an AS112 address",
  orchid2: "an ORCHID address",
  deprecatedOrchid: "an ORCHID address",
  segmentRouting: "a segment-routing address",
  droneRemoteIdProtocolEntityTags: "a drone remote ID address",
  ipv4Compatible: "an IPv4-compatible IPv6 address",
};

/**
 * `::a.b.c.d` (::/96, deprecated by RFC 4291): ipaddr.js counts it as unicast, but it names an
 * IPv4 address (::127.0.0.1 is loopback on hosts that still route it), so it is refused.
 */
function ipv4Compatible(address: Address): boolean {
  if (!(address instanceof ipaddr.IPv6)) return false;
  const parts = address.parts;
  return parts.slice(0, 6).every((part) => part === 0) && (parts[6] !== 0 || (parts[7] ?? 0) > 1);
}

/** `::a.b.c.d`, the IPv4-compatible form as Node writes it (dns.lookup answers, socket addresses). */
const IPV4_COMPATIBLE_TEXT = /^::(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/**
 * An address literal as ipaddr.js parses it, IPv4-mapped IPv6 turned into its IPv4. ipaddr.js
 * reads the dotted `::a.b.c.d` as the mapped `::ffff:a.b.c.d`: it is rewritten in hexadecimal
 * first, so it stays the IPv6 address it is (and ipv4Compatible() refuses it).
 */
function parseAddress(value: string): Address | null {
  let bare = value.replace(/^\[|\]$/g, "");
  const dotted = IPV4_COMPATIBLE_TEXT.exec(bare);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    if ([a, b, c, d].some((octet) => octet > 255)) return null;
    bare = `::${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  return ipaddr.isValid(bare) ? ipaddr.process(bare) : null;
}

/**
 * The SSRF guard of webhook delivery (decisions §8). Only public unicast addresses are
 * reached: loopback, private, link-local (cloud metadata included), carrier-grade NAT, unique
 * local, multicast, unspecified and every other special range are refused, IPv4 and IPv6 alike,
 * unless an operator listed the range in CONSENT_WEBHOOK_ALLOW_CIDRS. Plain http is only for
 * allow-listed hosts. The check runs on the resolved address as the socket connects (the lookup
 * hook), so a name that resolves differently later (DNS rebinding) gains nothing.
 */
export class AddressGuard {
  private readonly allowed: Cidr[];
  private readonly resolver: Resolver;
  /** Lookups running, in all and by tenant, and those waiting with the time they began to. */
  private running = 0;
  private readonly runningBy = new InFlightCounts();
  private readonly waiting: {
    since: number;
    tenant: string;
    start: () => void;
    give: () => void;
  }[] = [];

  /**
   * @throws RangeError naming the first entry that is not a CIDR or an address.
   * @param resolver how host names are resolved: dns.lookup unless a test says otherwise.
   */
  constructor(allowCidrs: readonly string[], resolver: Resolver = dnsLookup as Resolver) {
    this.resolver = resolver;
    this.allowed = allowCidrs.map((entry) => {
      try {
        const [address, bits] = entry.includes("/")
          ? ipaddr.parseCIDR(entry)
          : ([ipaddr.parse(entry), entry.includes(":") ? 128 : 32] as Cidr);
        // ::ffff:10.0.0.0/104 and 10.0.0.0/8 name the same addresses; addresses are compared as IPv4.
        if (address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress()) {
          return [address.toIPv4Address(), bits - 96] as Cidr;
        }
        return [address, bits] as Cidr;
      } catch {
        throw new RangeError(`"${entry}" is not a CIDR such as 10.0.0.0/8 or an address`);
      }
    });
  }

  /** True when `address` lies in a range the operator allowed. */
  isAllowListed(address: string): boolean {
    const parsed = parseAddress(address);
    if (!parsed) return false;
    return this.allowed.some(
      ([range, bits]) => range.kind() === parsed.kind() && parsed.match(range, bits),
    );
  }

  /** Why a connection to `address` is refused, or null when it is permitted. */
  refusalOf(address: string, httpOnlyAllowListed = false): string | null {
    const parsed = parseAddress(address);
    if (!parsed) return `${address} is not an IP address`;
    if (this.isAllowListed(address)) return null;
    if (httpOnlyAllowListed) {
      return `${HTTP_ONLY_ALLOW_LISTED}, and ${address} is not`;
    }
    const range = ipv4Compatible(parsed) ? "ipv4Compatible" : parsed.range();
    if (range === "unicast") return null;
    const what = METADATA.has(parsed.toString())
      ? "a cloud metadata address"
      : (RANGE_NAMES[range] ?? `a special-purpose address (${range})`);
    return `${address} is ${what}; ${PUBLIC_ONLY}`;
  }

  /**
   * Checks a URL before any connection: scheme, and an address literal host. A host name is
   * checked later, on each address it resolves to (lookup()).
   */
  checkUrl(url: URL): string | null {
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      return "the URL must use https (or http for hosts in CONSENT_WEBHOOK_ALLOW_CIDRS)";
    }
    const literal = parseAddress(url.hostname);
    if (literal) return this.refusalOf(url.hostname, url.protocol === "http:");
    if (url.protocol === "http:" && this.allowed.length === 0) {
      return "the URL must use https: plain http is only allowed to hosts in CONSENT_WEBHOOK_ALLOW_CIDRS, and none are set";
    }
    return null;
  }

  /**
   * A dns.lookup that refuses every answer unless all resolved addresses are permitted: the
   * socket connects only to what was checked here. For plain http, each address must be allow-listed.
   * `tenant` (a team's id) shares the lookups running at once fairly among teams.
   */
  lookup(httpOnlyAllowListed: boolean, tenant = ""): LookupFunction {
    return (hostname, options, callback) => {
      // Not which address, nor what kind, nor whether the name exists at all: a team may read
      // this (a delivery's lastError, TestWebhook), and the service's own DNS view of internal
      // names is not theirs. A name that resolves nowhere is told as one resolving to an
      // address out of reach, so the two cannot be told apart; so is every other failed
      // lookup (a resolver that failed for now, a name it would not look up), whose code
      // would tell one internal zone from another. A delivery is retried as after any failure.
      const allowed = httpOnlyAllowListed ? HTTP_ONLY_ALLOW_LISTED : PUBLIC_ONLY;
      const refusal = `${hostname} resolves to no address this service may reach; ${allowed}`;
      this.resolve(hostname, { ...options, all: true }, tenant, (error, addresses) => {
        if (error) {
          callback(new RefusedAddressError(refusal), "", 0);
          return;
        }
        for (const { address } of addresses) {
          if (this.refusalOf(address, httpOnlyAllowListed)) {
            callback(new RefusedAddressError(refusal), "", 0);
            return;
          }
        }
        const first = addresses[0];
        if (options.all)
          (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
        else if (first) callback(null, first.address, first.family);
        else callback(new RefusedAddressError(refusal), "", 0);
      });
    };
  }

  /**
   * Runs the resolver when fewer than MAX_LOOKUPS run, and fewer than MAX_LOOKUPS_PER_TENANT of
   * the tenant's, else once one ends, in turn. A lookup that waited past DELIVERY_TIMEOUT_MS
   * belongs to an attempt already given up: it fails unrun, so the queue never holds more than
   * that time's worth while names hang.
   */
  private resolve(
    hostname: string,
    options: Parameters<Resolver>[1],
    tenant: string,
    done: Parameters<Resolver>[2],
  ) {
    const start = () => {
      this.running += 1;
      this.runningBy.enter(tenant);
      this.resolver(hostname, options, (error, addresses) => {
        this.running -= 1;
        this.runningBy.leave(tenant);
        this.next();
        done(error, addresses);
      });
    };
    const give = () => {
      const error: NodeJS.ErrnoException = new Error(`lookup of ${hostname} waited too long`);
      error.code = "ETIMEOUT";
      done(error, []);
    };
    if (this.hasRoomFor(tenant)) start();
    else this.waiting.push({ since: performance.now(), tenant, start, give });
  }

  private hasRoomFor(tenant: string): boolean {
    return this.running < MAX_LOOKUPS && this.runningBy.of(tenant) < MAX_LOOKUPS_PER_TENANT;
  }

  /**
   * Once a lookup has ended: the waiting lookups that have room now, longest waiting first, past
   * those of a tenant whose room is taken; those waited out fail on the way.
   */
  private next(): void {
    for (let at = 0; at < this.waiting.length && this.running < MAX_LOOKUPS; ) {
      const turn = this.waiting[at] as (typeof this.waiting)[number];
      if (performance.now() - turn.since > DELIVERY_TIMEOUT_MS) {
        this.waiting.splice(at, 1);
        turn.give();
      } else if (this.hasRoomFor(turn.tenant)) {
        this.waiting.splice(at, 1);
        turn.start();
      } else at += 1;
    }
  }
}
