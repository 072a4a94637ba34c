import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { CallerHeaders } from "#daemon/auth/caller.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { startGateway } from "#gateway/main.js";
import { PAGE_LANGUAGES, pageTexts } from "#gateway/preferences/page-texts.js";
import { operatorTokenVerdict } from "#gateway/token-watch.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ErrorInfoSchema, OperatorTokenRefusal } from "#gen/consent/v1/errors_pb.js";
import { createTeam, mintKey, operator } from "#test/support/api.js";
import { aChoice, bannerFixture, postLog } from "#test/support/consent-log.js";
import { addressOf, errorInfoOf, loadConsentProtos, unary } from "#test/support/grpc-js.js";
import { startTestService, type TestService } from "#test/support/service.js";

type Gateway = Awaited<ReturnType<typeof startGateway>>;

/**
 * A gateway holding the token `daemon` had before (start-up's own check is not run here), closed
 * with the others in `gateways`.
 */
async function standAloneGateway(daemon: TestService, gateways: Gateway[]) {
  const logged: Record<string, unknown>[] = [];
  const gateway = await startGateway({
    config: daemon.config,
    transport: createDaemonTransport({ baseUrl: daemon.daemonUrl }),
    operatorToken: `${daemon.operatorToken}-before-it-changed`,
    inProcess: false,
    logger: pino({ level: "warn" }, { write: (line: string) => logged.push(JSON.parse(line)) }),
  });
  gateways.push(gateway);
  return { url: gateway.url, logged };
}

/**
 * A stand-alone gateway checks its operator token with the daemon when it starts; a daemon whose
 * admin token changes afterwards refuses the token on every call. Clients are then told the
 * service is unavailable (503, spec 7), not that their key is wrong; the operator reads why in
 * the gateway's log, once; and the gateway's health says unavailable.
 */
describe("a stand-alone gateway whose operator token the daemon no longer accepts", () => {
  let daemon: TestService;
  const gateways: Gateway[] = [];
  beforeAll(async () => {
    daemon = await startTestService();
  });
  afterAll(async () => {
    for (const gateway of gateways) await gateway.close();
    await daemon?.close();
  });

  // First: the next test's calls lock the address of every gateway of this test out for a minute.
  it("learns of the refusal from its health checks while it serves no request", async () => {
    const gateway = await standAloneGateway(daemon, gateways);
    await vi.waitFor(
      async () => expect((await fetch(`${gateway.url}/api/v1/health`)).status).toBe(503),
      { timeout: 5_000, interval: 100 },
    );
  });

  it("answers 503 unavailable, to retry in minutes, past the daemon's lockout of its address, logs why once, and its health says unavailable", async () => {
    const { key } = await mintKey(daemon, await createTeam(daemon));
    const { logged, ...gateway } = await standAloneGateway(daemon, gateways);
    // 15 calls: past the 10 failed attempts a minute after which the daemon answers the
    // gateway's address 429 (spec 8), which is the gateway's failure too, not the client's.
    for (let call = 0; call < 15; call++) {
      const answer = await fetch(`${gateway.url}/api/v1/banners`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(answer.status).toBe(503);
      // It lasts until the operator restarts the gateway: minutes, as the daemon's own 503s that
      // wait on the operator say, not the second of an outage that passes by itself.
      expect(answer.headers.get("retry-after")).toBe("300");
      expect(await answer.json()).toMatchObject({
        data: {
          code: "unavailable",
          error: "The service is temporarily unavailable; retry later",
        },
      });
    }
    const refusals = logged.filter((entry) => String(entry.msg).includes("operator token"));
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({
      level: 50,
      msg: expect.stringContaining("restart the gateway with the daemon's current token"),
    });
    const health = await fetch(`${gateway.url}/api/v1/health`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ data: { status: "unavailable" } });
  });
});

/**
 * spec 8: a stand-alone gateway puts its operator token to the daemon (at start-up, and while the
 * daemon refuses it) as the daemon judges its relayed calls, so the verdict is the token's own:
 * not the lockout of the gateway's host address, which other callers on the host may have caused,
 * and never a failed attempt that would add to it.
 */
describe("a stand-alone gateway's check of its operator token", () => {
  let daemon: TestService;
  let now = Date.parse("2026-11-22T12:07:10.000Z");
  beforeAll(async () => {
    daemon = await startTestService({ clock: () => new Date(now) });
  });
  afterAll(() => daemon?.close());

  it("finds the daemon's token accepted while its host's address is locked out, counting none of its checks as failed attempts", async () => {
    const transport = createDaemonTransport({ baseUrl: daemon.daemonUrl });
    const verdict = (token: string) => operatorTokenVerdict(transport, token, 2_000);
    const { admin } = operator(daemon);
    // A direct caller on the same host (127.0.0.1) with a wrong token: the code it is answered.
    const guess = () =>
      admin.listTeams({}, { headers: { authorization: "Bearer not-the-operator-token" } }).then(
        () => "answered",
        (error: unknown) => ConnectError.from(error).code,
      );

    for (let attempt = 0; attempt < 9; attempt++) expect(await guess()).toBe(Code.Unauthenticated);
    for (let check = 0; check < 3; check++)
      expect(await verdict(daemon.operatorToken)).toBe("accepted");
    // The checks were not counted: the tenth guess is still judged, the eleventh meets the lockout.
    expect(await guess()).toBe(Code.Unauthenticated);
    expect(await guess()).toBe(Code.ResourceExhausted);

    expect(await verdict(daemon.operatorToken)).toBe("accepted");
    expect(await verdict(`${daemon.operatorToken}-before-it-changed`)).toBe("locked out");
    // The next minute, the lockout over, a wrong token is refused.
    now += 60_000;
    expect(await verdict(`${daemon.operatorToken}-before-it-changed`)).toBe("refused");
    expect(await verdict(daemon.operatorToken)).toBe("accepted");
  });
});

/**
 * A stand-alone gateway judges its operator token by the daemon's ErrorInfo, not by its words
 * (daemon/auth/authenticator.ts): a refused consent-gateway-token, and an operator call that lacks
 * the operator token as its Bearer credential (which is what the gateway's probe, sending none,
 * is answered when its consent-gateway-token is taken), each say so in `operator_token_refusal`,
 * and keep their sentences for people and grpc-js callers.
 */
describe("the daemon's answers over the operator token", () => {
  let daemon: TestService;
  beforeAll(async () => {
    daemon = await startTestService();
  });
  afterAll(() => daemon?.close());

  it("name which place of the operator token a call fails in their ErrorInfo, with their sentences", async () => {
    const { admin, auth } = operator(daemon);
    const wrongGatewayToken = { [CallerHeaders.gatewayToken]: "not-the-operator-token" };
    const answer = (call: Promise<unknown>) =>
      call.then(
        () => "answered",
        (error: unknown) => {
          const failure = ConnectError.from(error);
          const info = failure.findDetails(ErrorInfoSchema)[0];
          return [
            Code[failure.code],
            failure.rawMessage,
            info?.code,
            OperatorTokenRefusal[info?.operatorTokenRefusal ?? 0],
          ];
        },
      );
    const team = { id: "00000000-0000-0000-0000-000000000000" };

    expect(await answer(admin.getTeam(team, { headers: wrongGatewayToken }))).toEqual([
      "Unauthenticated",
      "The consent-gateway-token is not this daemon's operator token",
      "unauthorized",
      "WRONG_GATEWAY_TOKEN",
    ]);
    // Also with the operator token as the Bearer credential: the gateway token is checked first.
    expect(
      await answer(admin.getTeam(team, { headers: { ...auth.headers, ...wrongGatewayToken } })),
    ).toEqual([
      "Unauthenticated",
      "The consent-gateway-token is not this daemon's operator token",
      "unauthorized",
      "WRONG_GATEWAY_TOKEN",
    ]);
    const bearerNeeded = [
      "Unauthenticated",
      "This call needs the operator token",
      "unauthorized",
      "BEARER_NEEDED",
    ];
    // The gateway's probe: its token taken, no Bearer token.
    const probe = { [CallerHeaders.gatewayToken]: daemon.operatorToken };
    expect(await answer(admin.getTeam(team, { headers: probe }))).toEqual(bearerNeeded);
    expect(await answer(admin.getTeam(team))).toEqual(bearerNeeded);
    expect(
      await answer(admin.getTeam(team, { headers: { authorization: "Bearer not-the-token" } })),
    ).toEqual(bearerNeeded);
    // A refused API key is no refusal over the operator token.
    const banners = createClient(BannerService, createGrpcTransport({ baseUrl: daemon.daemonUrl }));
    const guess = { authorization: "Bearer ck_live_guess" };
    expect(await answer(banners.listBanners({}, { headers: guess }))).toEqual([
      "Unauthenticated",
      "The API key is malformed or unknown",
      "invalid_key",
      "UNSPECIFIED",
    ]);

    // A grpc-js caller reads the sentence, and the same ErrorInfo from grpc-status-details-bin.
    const { consent } = loadConsentProtos();
    const client = new consent.v1.BannerService(
      addressOf(daemon.daemonUrl),
      grpc.credentials.createInsecure(),
    );
    try {
      const metadata = new grpc.Metadata();
      metadata.set(CallerHeaders.gatewayToken, "not-the-operator-token");
      const outcome = await unary(client, "listBanners", {}, metadata);
      expect(outcome.ok).toBe(false);
      if (outcome.ok) return;
      const { info } = errorInfoOf(outcome.error);
      expect([
        outcome.error.code,
        outcome.error.details,
        info?.code,
        info?.operatorTokenRefusal,
      ]).toEqual([
        grpc.status.UNAUTHENTICATED,
        "The consent-gateway-token is not this daemon's operator token",
        "unauthorized",
        OperatorTokenRefusal.WRONG_GATEWAY_TOKEN,
      ]);
    } finally {
      client.close();
    }
  });
});

/** What the visitor reads of a page: its title, then its heading, paragraphs and links. */
function shown(html: string) {
  return {
    title: /<title>(.*)<\/title>/.exec(html)?.[1],
    main: /<main>([\s\S]*)<\/main>/.exec(html)?.[1],
  };
}

/**
 * decisions §5: the preferences page of a gateway the daemon refuses is no brief outage the
 * visitor waits out but a fault on the service's side until the operator restarts the gateway:
 * a visit and a save say, in the visitor's language, that something went wrong and to try again
 * later, never to wait a moment, and nothing of the gateway's setup, each with the link to the
 * page to try again from; both 503 with the REST answer's Retry-After.
 */
describe("the preferences page of a stand-alone gateway whose operator token the daemon no longer accepts", () => {
  let daemon: TestService;
  const gateways: Gateway[] = [];
  let link: string;
  let gatewayUrl: string;
  beforeAll(async () => {
    daemon = await startTestService({ gateway: true });
    const { publicId } = await bannerFixture(daemon);
    link = new URL((await postLog(daemon, aChoice(publicId))).body.managePreferences).pathname;
    gatewayUrl = (await standAloneGateway(daemon, gateways)).url;
  });
  afterAll(async () => {
    for (const gateway of gateways) await gateway.close();
    await daemon?.close();
  });

  async function page(method: "GET" | "POST", language = "en") {
    const response = await fetch(`${gatewayUrl}${link}`, {
      method,
      headers: {
        "accept-language": language,
        ...(method === "POST" && { "content-type": "application/x-www-form-urlencoded" }),
      },
      body: method === "POST" ? "category=analytics" : undefined,
      redirect: "manual",
    });
    const text = await response.text();
    return { status: response.status, retryAfter: response.headers.get("retry-after"), text };
  }

  it("says something went wrong on the service's side and to try again later from the page it links to, not to wait a moment", async () => {
    const visit = await page("GET");
    expect([visit.status, visit.retryAfter, shown(visit.text)]).toEqual([
      503,
      "300",
      {
        title: "Something went wrong",
        main: '<h1>Something went wrong</h1>\n<p>Something went wrong on this service’s side, not yours. Your privacy settings could not be shown just now. Please try again later.</p>\n<p><a href="">Open your privacy settings</a></p>',
      },
    ]);
    const save = await page("POST");
    expect([save.status, save.retryAfter, shown(save.text)]).toEqual([
      503,
      "300",
      {
        title: "Your choices were not saved – Something went wrong",
        main: '<h1>Your choices were not saved</h1>\n<p>Something went wrong on this service’s side. Open your privacy settings and try again later.</p>\n<p><a href="">Open your privacy settings</a></p>',
      },
    ]);

    // In every language the page ships, its own sentences for a fault of the service's.
    for (const lang of PAGE_LANGUAGES) {
      const { texts } = pageTexts(lang);
      const [title, text] = texts.errors.other;
      const visitIn = await page("GET", lang);
      expect([lang, visitIn.status, visitIn.retryAfter, shown(visitIn.text)]).toEqual([
        lang,
        503,
        "300",
        {
          title,
          main: `<h1>${title}</h1>\n<p>${text}</p>\n<p><a href="">${texts.openSettings}</a></p>`,
        },
      ]);
      const saveIn = await page("POST", lang);
      expect([lang, saveIn.status, saveIn.retryAfter, shown(saveIn.text)]).toEqual([
        lang,
        503,
        "300",
        {
          title: `${texts.notSaved.title} – ${title}`,
          main: `<h1>${texts.notSaved.title}</h1>\n<p>${texts.notSaved.because.other}</p>\n<p><a href="">${texts.openSettings}</a></p>`,
        },
      ]);
    }
  });
});
