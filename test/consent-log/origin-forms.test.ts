import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import type { Client, ServiceError } from "@grpc/grpc-js";
import { credentials, status as grpcStatus } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import {
  aChoice,
  bannerFixture,
  ipSource,
  postLog,
  storedRows,
  useVisitorService,
} from "#test/support/consent-log.js";
import { addressOf, errorInfoOf, loadConsentProtos, unary } from "#test/support/grpc-js.js";

/** A request's Origin and Referer (undefined: not sent), and what each caller should get. */
interface Case {
  origin?: string;
  referer?: string;
  /** The log route's status; an internal gRPC caller gets the same verdict. */
  status: 200 | 403;
  /** Whether the log route echoes the Origin as Access-Control-Allow-Origin. */
  echoed: boolean;
}

const SITE = "https://shop.example.com";

/**
 * decisions §5: the forms of Origin and Referer a browser (or anything else) sends, read the same
 * way by the log route's domain check, its CORS echo, and RecordConsent called directly over gRPC
 * (Connect's gRPC and Connect protocols, grpc-js).
 */
const cases: Record<string, Case> = {
  "an origin": { origin: SITE, status: 200, echoed: true },
  "an origin in capitals": { origin: "HTTPS://SHOP.EXAMPLE.COM", status: 200, echoed: true },
  "a fully qualified origin": { origin: `${SITE}.`, status: 200, echoed: true },
  "a subdomain's origin": { origin: "http://eu.shop.example.com", status: 200, echoed: true },
  "another site's origin": { origin: "https://evil.test", status: 403, echoed: true },
  "another site's origin, the site's Referer": {
    origin: "https://evil.test",
    referer: `${SITE}/`,
    status: 403,
    echoed: true,
  },
  // An opaque origin names no host: the Referer is read, as when no Origin is sent. A redirect
  // across origins sends both (Chromium: Origin null, Referer the page's origin).
  "null, the site's Referer": { origin: "null", referer: `${SITE}/`, status: 200, echoed: false },
  "null, another site's Referer": {
    origin: "null",
    referer: "https://evil.test/",
    status: 403,
    echoed: false,
  },
  "null alone": { origin: "null", status: 403, echoed: false },
  // No browser sends these as an Origin: read for a host, they would pass unechoed.
  "an origin with a path": { origin: `${SITE}/cart`, status: 403, echoed: false },
  "an origin with a slash": { origin: `${SITE}/`, status: 403, echoed: false },
  "an origin with an empty query": { origin: `${SITE}?`, status: 403, echoed: false },
  "an origin with an empty fragment": { origin: `${SITE}#`, status: 403, echoed: false },
  "an origin with credentials": {
    origin: "https://u:p@shop.example.com",
    status: 403,
    echoed: false,
  },
  "an origin with its default port": { origin: `${SITE}:443`, status: 403, echoed: false },
  "two origins": { origin: `${SITE}, https://evil.test`, status: 403, echoed: false },
  "an origin with a path, the site's Referer": {
    origin: `${SITE}/cart`,
    referer: `${SITE}/`,
    status: 403,
    echoed: false,
  },
  // A Referer is an address: its path, case, dot and credentials do not change its host.
  "the site's Referer alone": { referer: `${SITE}/cart?x=1`, status: 200, echoed: false },
  "a Referer in capitals with a dot": {
    referer: "HTTPS://SHOP.EXAMPLE.COM./cart",
    status: 200,
    echoed: false,
  },
  "a Referer with credentials": {
    referer: "https://u:p@shop.example.com/cart",
    status: 200,
    echoed: false,
  },
  "a Referer naming the site as credentials": {
    referer: "https://shop.example.com@evil.test/",
    status: 403,
    echoed: false,
  },
  "neither header": { status: 403, echoed: false },
};

/** Cases for a banner on bücher.example, stored punycoded: browsers send its hosts so too. */
const idnCases: Record<string, Case> = {
  "a punycoded origin": { origin: "https://xn--bcher-kva.example", status: 200, echoed: true },
  "a punycoded subdomain": {
    origin: "https://www.xn--bcher-kva.example",
    status: 200,
    echoed: true,
  },
  "a punycoded Referer": {
    referer: "https://xn--bcher-kva.example/seite",
    status: 200,
    echoed: false,
  },
};

describe("the log route's Origin and Referer forms, over REST and gRPC alike", () => {
  const ctx = useVisitorService("2026-11-22T12:00:30.000Z");
  const ip = ipSource();
  let grpcJs: Client;
  beforeAll(() => {
    const { consent } = loadConsentProtos();
    grpcJs = new consent.v1.ConsentLogService(
      addressOf(ctx.service.daemonUrl),
      credentials.createInsecure(),
    );
  });
  afterAll(() => grpcJs?.close());

  /** The REST answer: status, error code, and the Access-Control-Allow-Origin echoed. */
  async function overRest(publicId: string, { origin, referer }: Case) {
    const result = await postLog(ctx.service, aChoice(publicId), {
      ip: ip(),
      origin: origin ?? null,
      ...(referer !== undefined && { referer }),
    });
    return {
      status: result.status,
      code: result.body.code,
      allowOrigin: result.headers.get("access-control-allow-origin"),
    };
  }

  /** The gRPC answer of RecordConsent from a Connect client (either protocol): status, code. */
  async function overConnect(publicId: string, { origin = "", referer = "" }: Case, grpc: boolean) {
    const options = { baseUrl: ctx.service.daemonUrl, httpVersion: "2" as const };
    const transport = grpc ? createGrpcTransport(options) : createConnectTransport(options);
    const call = createClient(ConsentLogService, transport).recordConsent({
      bannerId: publicId,
      preferences: { necessary: true },
      method: "accept_all",
      timestamp: new Date().toISOString(),
      requestOrigin: { origin, referer },
    });
    return call.then(
      () => ({ status: 200 }),
      (e: unknown) => {
        const error = ConnectError.from(e);
        const code = error.findDetails(ErrorInfoSchema)[0]?.code;
        return { status: error.code === Code.PermissionDenied ? 403 : error.code, code };
      },
    );
  }

  /** The same call from grpc-js, built from the .proto files alone. */
  async function overGrpcJs(publicId: string, { origin = "", referer = "" }: Case) {
    const outcome = await unary(grpcJs, "recordConsent", {
      bannerId: publicId,
      preferences: { necessary: true },
      method: "accept_all",
      timestamp: new Date().toISOString(),
      requestOrigin: { origin, referer },
    });
    if (outcome.ok) return { status: 200 };
    const error: ServiceError = outcome.error;
    const status = error.code === grpcStatus.PERMISSION_DENIED ? 403 : error.code;
    return { status, code: errorInfoOf(error).info?.code };
  }

  /** Every case's answers from every caller, beside what each should be. */
  async function answers(publicId: string, table: Record<string, Case>) {
    const seen: Record<string, unknown> = {};
    const expected: Record<string, unknown> = {};
    for (const [name, request] of Object.entries(table)) {
      const verdict = {
        status: request.status,
        ...(request.status === 403 && { code: "domain_not_authorized" }),
      };
      seen[name] = {
        rest: await overRest(publicId, request),
        connectGrpc: await overConnect(publicId, request, true),
        connect: await overConnect(publicId, request, false),
        grpcJs: await overGrpcJs(publicId, request),
      };
      expected[name] = {
        rest: {
          status: request.status,
          code: request.status === 403 ? "domain_not_authorized" : undefined,
          allowOrigin: request.echoed ? (request.origin ?? null) : null,
        },
        connectGrpc: verdict,
        connect: verdict,
        grpcJs: verdict,
      };
    }
    return { seen, expected };
  }

  it("judges each form of Origin and Referer alike from the log route and from gRPC callers", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const { seen, expected } = await answers(publicId, cases);
    expect(seen).toEqual(expected);
    const accepted = Object.values(cases).filter((c) => c.status === 200).length;
    expect(await storedRows(ctx.service, teamId)).toHaveLength(accepted * 4);
  });

  it("judges the punycoded hosts of an IDN banner alike from every caller", async () => {
    const { publicId } = await bannerFixture(ctx.service, { domain: "bücher.example" });
    const { seen, expected } = await answers(publicId, idnCases);
    expect(seen).toEqual(expected);
  });

  it("judges one Origin, read once and kept, by each banner it is posted to", async () => {
    const shop = await bannerFixture(ctx.service);
    const other = await bannerFixture(ctx.service, { domain: "other.example" });
    // The same value, in the order a kept reading could leak from one banner's answer to another's.
    const posts = [shop, other, shop, other].map((banner) =>
      postLog(ctx.service, aChoice(banner.publicId), { ip: ip(), origin: SITE }),
    );
    const answered = (await Promise.all(posts)).map((posted) => [
      posted.status,
      posted.body.code,
      posted.headers.get("access-control-allow-origin"),
    ]);
    const refused = [403, "domain_not_authorized", SITE];
    expect(answered).toEqual([[200, undefined, SITE], refused, [200, undefined, SITE], refused]);
    expect(await storedRows(ctx.service, shop.teamId)).toHaveLength(2);
    expect(await storedRows(ctx.service, other.teamId)).toEqual([]);
  });

  it("keeps the Referer's site as the row's page address when Origin is null", async () => {
    const { teamId, publicId } = await bannerFixture(ctx.service);
    const posted = await postLog(ctx.service, aChoice(publicId), {
      ip: ip(),
      origin: "null",
      referer: `${SITE}/cart?x=1`,
    });
    expect([posted.status, posted.headers.get("access-control-allow-origin")]).toEqual([200, null]);
    expect(posted.headers.get("vary")).toBe("Origin");
    // The default telemetryLevel, origin: scheme and host.
    expect((await storedRows(ctx.service, teamId)).map((row) => row.pageUrl)).toEqual([SITE]);
  });
});
