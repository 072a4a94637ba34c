import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import { ConnectError } from "@connectrpc/connect";
import type { Document } from "mongodb";
import { pino } from "pino";
import { describe, expect, it, type TestContext } from "vitest";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { loadConfig } from "#daemon/config.js";
import { cursorReply, emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { STALE_RETRY_MS } from "#gateway/loader/stale-if-error.js";
import { startGateway } from "#gateway/main.js";
import { createBanner, createTeam, type HttpResult, http, mintKey } from "#test/support/api.js";
import { watchingBannerReads } from "#test/support/banner-reads.js";
import { endpoints, freePort } from "#test/support/processes.js";
import { grpcFrame, openHealthCall } from "#test/support/raw-http2.js";
import { startTestService } from "#test/support/service.js";
import { failureFrom, startStandInDaemon } from "#test/support/stand-in-daemon.js";

const UNAVAILABLE = {
  error: "The service is temporarily unavailable; retry later",
  code: "unavailable",
};
/** The daemon's own 503 for its store unable to serve, passed on (rpc/connect-errors.ts). */
const STORE_UNAVAILABLE = {
  error: "The store is temporarily unavailable; retry later",
  code: "unavailable",
};
/** The daemon port's request budget, shrunk so that one request can hold all of it. */
const REQUEST_BUDGET_BYTES = 32 * 1024;
/** A server shedding load: its admission queue full, refused at once (mongo-unavailable.ts). */
const ADMISSION_QUEUE_OVERFLOW = {
  ok: 0,
  code: 433,
  codeName: "AdmissionQueueOverflow",
  errmsg: "the admission queue is full",
};
/**
 * What the daemon answers `unavailable` with Retry-After: 300 for (mongo-unavailable.ts): an
 * outage only the operator ends, so a Retry-After far past the loader's 5 s.
 */
const UNSATISFIABLE_WRITE_CONCERN = {
  ok: 0,
  code: 100,
  codeName: "UnsatisfiableWriteConcern",
  errmsg: "Not enough data-bearing nodes",
};

/** Past the Retry-After: 1 of an overloaded daemon, well within the 5 s of an outage. */
const PAST_ONE_SECOND_MS = 1_300;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A banner read the gateway sent the daemon: when, and when and how it ended. */
interface BannerRead {
  sentAt: number;
  outcome: Promise<{ at: number; error?: unknown }>;
}

/** A stand-alone gateway over `daemonUrl` on a free port, watching its banner reads. */
async function gatewayCountingReads(daemonUrl: string, operatorToken: string) {
  const sent: BannerRead[] = [];
  const gateway = await startGateway({
    config: loadConfig({ CONSENT_HTTP_PORT: "0" }),
    transport: watchingBannerReads(createDaemonTransport({ baseUrl: daemonUrl }), (answer) =>
      sent.push({
        sentAt: Date.now(),
        outcome: answer.then(
          () => ({ at: Date.now() }),
          (error: unknown) => ({ at: Date.now(), error }),
        ),
      }),
    ),
    operatorToken,
    logger: pino({ level: "silent" }),
  });
  const service = endpoints({ daemonUrl, gatewayUrl: gateway.url, operatorToken });
  return {
    service,
    /** How many banner reads the gateway has sent the daemon so far. */
    reads: () => sent.length,
    /** The banner reads sent so far, in order. */
    sent,
    loader: (publicId: string) => http(service, "GET", `/loader/${publicId}.js`),
    close: () => gateway.close(),
  };
}

const retryAfterOf = (answer: HttpResult) => answer.headers.get("retry-after");

/**
 * A banner never served whose reads the daemon refuses at once asking for a retry in a second:
 * `body` with Retry-After: 1, again without a call within that second, and once it has passed
 * the daemon asked again (and refusing again).
 */
async function expectAskedAgainAfterASecond(
  gateway: Awaited<ReturnType<typeof gatewayCountingReads>>,
  publicId: string,
  body: typeof UNAVAILABLE,
): Promise<void> {
  const before = gateway.reads();
  const refused = await gateway.loader(publicId);
  expect([refused.status, refused.body, retryAfterOf(refused)]).toEqual([503, body, "1"]);
  expect(gateway.reads()).toBe(before + 1);
  const again = await gateway.loader(publicId);
  expect([again.status, again.body, retryAfterOf(again)]).toEqual([503, body, "1"]);
  expect(gateway.reads()).toBe(before + 1);
  await pause(PAST_ONE_SECOND_MS);
  const retried = await gateway.loader(publicId);
  expect([retried.status, retried.body, retryAfterOf(retried)]).toEqual([503, body, "1"]);
  expect(gateway.reads()).toBe(before + 2);
}

/*
 * The tests of this file run side by side (both describes are concurrent): each has a daemon, a
 * gateway and its reads of its own, and spends most of its time waiting out the loader's 1 s or
 * 5 s.
 */

/**
 * A daemon that is up but refuses a banner read at once for want of capacity, asking for a retry
 * after a second (failed-reads.ts): the loader's 503 for a banner it never served holds only that
 * second, not the 5 s of a daemon out of reach, so a blip does not hide the banner from every
 * visitor of its sites for 5 s. A longer Retry-After of the daemon's is passed on counting down.
 */
describe("the loader of a stand-alone gateway whose daemon refuses reads for want of capacity", {
  concurrent: true,
}, () => {
  const operatorToken = generateOperatorToken();
  /**
   * A daemon over a MongoDB stand-in whose reads of banners get `banners()` (none found unless it
   * says otherwise), CONSENT_MONGODB_TIMEOUT_MS at `timeoutMs` if given, and a gateway over it:
   * the test's own, the daemon and its stand-in closed when the test ends.
   */
  const gatewayOverStandIn = async (
    { onTestFinished }: Pick<TestContext, "onTestFinished">,
    banners: (noneFound: Document) => Document | Promise<Document>,
    timeoutMs?: number,
  ) => {
    const running = await startStandInDaemon(
      emptyDatabase(undefined, {
        find: (command) => {
          const noneFound = cursorReply(`${command.$db}.${command.find}`, []);
          return command.find === "banners" ? banners(noneFound) : noneFound;
        },
      }),
      { operatorToken, timeoutMs },
    );
    onTestFinished(() => running.close());
    return gatewayCountingReads(running.daemonUrl, operatorToken);
  };

  it("asks a daemon over its request budget again once the second it asked for has passed, and serves the banner once the budget frees up", async () => {
    const daemon = await startTestService({ requestBudgetBytes: REQUEST_BUDGET_BYTES });
    const gateway = await gatewayCountingReads(daemon.daemonUrl, daemon.operatorToken);
    const session = http2.connect(daemon.daemonUrl);
    session.on("error", () => {});
    try {
      const { key } = await mintKey(gateway.service, await createTeam(gateway.service));
      const { publicId } = await createBanner(gateway.service, key);
      // Another client's request announced larger than it sends holds the whole budget.
      const hog = openHealthCall(session, "Check");
      const held = grpcFrame(Buffer.alloc(REQUEST_BUDGET_BYTES - 5), 2 * REQUEST_BUDGET_BYTES);
      await new Promise((resolve) => hog.write(held, resolve));
      await pause(300);

      const before = gateway.reads();
      // Reset over the budget: the gateway's own 503, Retry-After: 1, as for any reset call.
      await expectAskedAgainAfterASecond(gateway, publicId, UNAVAILABLE);

      // The budget freed: the banner is served a second after the last refusal, not 5 s.
      hog.close(http2.constants.NGHTTP2_CANCEL);
      await pause(PAST_ONE_SECOND_MS);
      const served = await gateway.loader(publicId);
      expect(served.status).toBe(200);
      expect(served.text).toContain(publicId);
      expect(gateway.reads()).toBe(before + 3);
    } finally {
      session.destroy();
      await gateway.close();
      await daemon.close();
    }
  });

  it("asks a daemon whose store sheds load again once the second it asked for has passed", async (context) => {
    let refusal: Document | undefined = ADMISSION_QUEUE_OVERFLOW;
    const gateway = await gatewayOverStandIn(context, (noneFound) => refusal ?? noneFound);
    try {
      const publicId = randomUUID();
      // The daemon's own 503 for its store, passed on.
      await expectAskedAgainAfterASecond(gateway, publicId, STORE_UNAVAILABLE);

      // The store serves again: the daemon's answer a second on (no such banner: 404).
      refusal = undefined;
      await pause(PAST_ONE_SECOND_MS);
      const answered = await gateway.loader(publicId);
      expect([answered.status, answered.body]).toEqual([
        404,
        { error: "No active banner with that public Banner ID", code: "not_found" },
      ]);
      expect(gateway.reads()).toBe(3);
    } finally {
      await gateway.close();
    }
  });

  it("asks a daemon whose store stopped answering again 5 s after the read's late refusal, not the second that refusal asks for", async (context) => {
    let banners: "refused" | "stalled" = "refused";
    const gateway = await gatewayOverStandIn(
      context,
      () => (banners === "refused" ? ADMISSION_QUEUE_OVERFLOW : new Promise(() => {})),
      // The driver gives a silent server up after 2 × 2 s: past the 2 s a request waits.
      2_000,
    );
    try {
      const publicId = randomUUID();
      expect(retryAfterOf(await gateway.loader(publicId))).toBe("1");
      banners = "stalled";
      await pause(PAST_ONE_SECOND_MS);
      // The read after it goes unanswered past the 2 s a request waits: 503, 5 s.
      const unanswered = await gateway.loader(publicId);
      expect([unanswered.status, unanswered.body]).toEqual([503, UNAVAILABLE]);
      expect(gateway.reads()).toBe(2);
      // The daemon refuses it once its store is given up, asking for a retry in a second.
      const late = await (gateway.sent[1] as BannerRead).outcome;
      expect(failureFrom(ConnectError.from(late.error)).retryAfter).toBe("1");
      banners = "refused";
      // Yet the next read comes 5 s after that refusal, as after a daemon out of reach.
      while (gateway.reads() === 2 && Date.now() - late.at < 3 * STALE_RETRY_MS) {
        const answer = await gateway.loader(publicId);
        expect([answer.status, answer.body]).toEqual([503, STORE_UNAVAILABLE]);
        await pause(200);
      }
      expect(gateway.reads()).toBe(3);
      expect((gateway.sent[2] as BannerRead).sentAt - late.at).toBeGreaterThanOrEqual(
        STALE_RETRY_MS - 100,
      );
    } finally {
      await gateway.close();
    }
  });

  it("passes on a Retry-After of the daemon's longer than 5 s counting down, and asks it again only after 5 s", async (context) => {
    const gateway = await gatewayOverStandIn(context, () => UNSATISFIABLE_WRITE_CONCERN);
    try {
      const publicId = randomUUID();
      const refused = await gateway.loader(publicId);
      expect([refused.status, refused.body, retryAfterOf(refused)]).toEqual([
        503,
        STORE_UNAVAILABLE,
        "300",
      ]);
      await pause(PAST_ONE_SECOND_MS);
      const later = await gateway.loader(publicId);
      expect(later.status).toBe(503);
      // The seconds left of the daemon's 300 (at least one has passed), not 300 again.
      expect(Number(retryAfterOf(later))).toBeLessThanOrEqual(299);
      expect(Number(retryAfterOf(later))).toBeGreaterThan(STALE_RETRY_MS / 1_000);
      expect(gateway.reads()).toBe(1);
    } finally {
      await gateway.close();
    }
  });
});

describe("the loader of a stand-alone gateway whose daemon cannot be reached", {
  concurrent: true,
}, () => {
  it("answers a banner it never served 503 for 5 s without asking again, its Retry-After counting down", async () => {
    const nothingListening = `http://127.0.0.1:${await freePort()}`;
    const gateway = await gatewayCountingReads(nothingListening, "unused-operator-token");
    try {
      const publicId = randomUUID();
      const refused = await gateway.loader(publicId);
      expect([refused.status, refused.body]).toEqual([503, UNAVAILABLE]);
      expect(Number(retryAfterOf(refused))).toBe(STALE_RETRY_MS / 1_000);
      expect(gateway.reads()).toBe(1);
      await pause(PAST_ONE_SECOND_MS);
      const later = await gateway.loader(publicId);
      expect([later.status, later.body]).toEqual([503, UNAVAILABLE]);
      expect(Number(retryAfterOf(later))).toBeLessThan(STALE_RETRY_MS / 1_000);
      expect(Number(retryAfterOf(later))).toBeGreaterThanOrEqual(1);
      expect(gateway.reads()).toBe(1);
    } finally {
      await gateway.close();
    }
  });
});
