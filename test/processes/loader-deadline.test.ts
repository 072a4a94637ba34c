import { create, toBinary } from "@bufbuild/protobuf";
import { describe, it } from "vitest";
import { STALE_RETRY_MS } from "#gateway/loader/stale-if-error.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import {
  createBanner,
  createTeam,
  type HttpResult,
  mintKey,
  publishConfiguration,
} from "#test/support/api.js";
import {
  type AnswerInstead,
  daemonRelay,
  gatewayThroughRelay,
} from "#test/support/daemon-relay.js";
import { startTestService } from "#test/support/service.js";

const USUAL = "public, max-age=300, stale-while-revalidate=60";
const STALE = "public, max-age=60, stale-while-revalidate=60";
const UNAVAILABLE = {
  error: "The service is temporarily unavailable; retry later",
  code: "unavailable",
};

/**
 * A call's deadline passed on the daemon's side, told in the Connect protocol with an ErrorInfo,
 * as a daemon that bounds its own calls would: HTTP 504, `deadline_exceeded`.
 */
const deadlineExceeded: AnswerInstead = (stream) => {
  const info = toBinary(ErrorInfoSchema, create(ErrorInfoSchema, { code: "deadline_exceeded" }));
  stream.respond({ ":status": 504, "content-type": "application/json" });
  stream.end(
    JSON.stringify({
      code: "deadline_exceeded",
      message: "the store did not answer in time",
      details: [
        {
          type: ErrorInfoSchema.typeName,
          value: Buffer.from(info).toString("base64").replace(/=+$/, ""),
        },
      ],
    }),
  );
};

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/*
 * The tests of this file run side by side (both describes are concurrent): each has a daemon, a
 * relay and a gateway of its own, and spends most of its time waiting out the loader's 5 s or the
 * outage log's 10 s. Each asserts with its own `expect` (the test context's), which expect.poll
 * needs while another test runs.
 */

/**
 * A banner read whose deadline passed on the daemon's side (gRPC DEADLINE_EXCEEDED, with an
 * ErrorInfo or without) is the daemon briefly unable to answer, as `unavailable` is (errors.ts,
 * isDaemonUnavailable): a banner the gateway served is served as last read (stale-if-error), and
 * one it never served is answered the loader's 503 with a Retry-After of the seconds until the
 * daemon is asked again, 5 s on (failed-reads.ts), never a 500.
 */
describe("the loader of a stand-alone gateway whose daemon's banner reads pass their deadline", {
  concurrent: true,
}, () => {
  it("serves a banner it served as last read, and answers one it never served 503 until it asks again 5 s on", async ({
    expect,
  }) => {
    const daemon = await startTestService();
    let pastDeadline = false;
    let reads = 0;
    const relay = await daemonRelay(daemon.daemonUrl, (path) => {
      if (!path.endsWith("/GetPublishedBanner")) return undefined;
      reads++;
      return pastDeadline ? deadlineExceeded : undefined;
    });
    const gateway = await gatewayThroughRelay(daemon, relay.url);
    const { service, logs, loader } = gateway;
    const refusal = (answer: HttpResult) => [
      answer.status,
      answer.headers.get("content-type"),
      answer.body,
    ];
    try {
      const { key } = await mintKey(service, await createTeam(service));
      const served = await createBanner(service, key);
      const unserved = await createBanner(service, key);
      const first = await loader(served.publicId);
      expect([first.status, first.headers.get("cache-control")]).toEqual([200, USUAL]);

      pastDeadline = true;
      // A publish through this gateway: the banner's next request reads it from the daemon.
      await publishConfiguration(service, key, served.id, { position: "top" });
      const held = await loader(served.publicId);
      expect([held.status, held.headers.get("cache-control")]).toEqual([200, STALE]);
      expect([held.headers.get("etag"), held.text]).toEqual([
        first.headers.get("etag"),
        first.text,
      ]);

      const before = reads;
      const refused = await loader(unserved.publicId);
      const refusedAt = Date.now();
      expect(refusal(refused)).toEqual([503, "application/json; charset=utf-8", UNAVAILABLE]);
      expect(refused.headers.get("retry-after")).toBe(String(STALE_RETRY_MS / 1_000));
      expect(reads).toBe(before + 1);
      // Answered again without a call, the Retry-After counting down to the next read.
      await pause(1_100);
      const again = await loader(unserved.publicId);
      expect(refusal(again)).toEqual([503, "application/json; charset=utf-8", UNAVAILABLE]);
      expect(Number(again.headers.get("retry-after"))).toBeLessThan(STALE_RETRY_MS / 1_000);
      expect(reads).toBe(before + 1);

      // The daemon answers again: the banner is read once those 5 s are over, and served.
      pastDeadline = false;
      await pause(refusedAt + STALE_RETRY_MS - Date.now());
      const answered = await loader(unserved.publicId);
      expect([answered.status, answered.headers.get("cache-control")]).toEqual([200, USUAL]);
      expect(answered.text).toContain(unserved.publicId);
      expect(reads).toBe(before + 2);

      // The operator reads the daemon's own words for the failure, as a warning, not an error.
      expect(logs.filter((entry) => entry.level === 50)).toEqual([]);
      expect(logs).toContainEqual(
        expect.objectContaining({
          level: 40,
          cause: "[deadline_exceeded] the store did not answer in time",
        }),
      );
    } finally {
      await gateway.close();
      await relay.close();
      await daemon.close();
    }
  });
});

/** A proxy before the daemon answering 503 without a body: `unavailable`, not the daemon's. */
const proxyUnavailable: AnswerInstead = (stream) => {
  stream.respond({ ":status": 503 });
  stream.end();
};

const OUTAGE = "the daemon could not be reached or has not answered: requests are answered 503";

/**
 * Regression: a failed read of a banner never served is answered again for 5 s without a call
 * (failed-reads.ts), and each of those requests logged a warning of its own when the failure was
 * a deadline or a proxy's 503, so an outage under traffic flooded the log. Such failures are
 * warned of as a daemon out of reach is: at once, then at most every 10 s per cause with the
 * requests answered 503 for it since.
 */
describe("the log of a stand-alone gateway whose loader answers failed reads from memory", {
  concurrent: true,
}, () => {
  it("warns once of a deadline and once of a proxy's 503, then counts the requests answered from memory in the next warning of each", async ({
    expect,
  }) => {
    const daemon = await startTestService();
    let answer: AnswerInstead = deadlineExceeded;
    let reads = 0;
    const relay = await daemonRelay(daemon.daemonUrl, (path) => {
      if (!path.endsWith("/GetPublishedBanner")) return undefined;
      reads++;
      return answer;
    });
    const gateway = await gatewayThroughRelay(daemon, relay.url);
    const { service, logs, loader } = gateway;
    const warnings = () => logs.filter((entry) => entry.level === 40);
    try {
      const { key } = await mintKey(service, await createTeam(service));
      const pastDeadline = await createBanner(service, key);
      const behindProxy = await createBanner(service, key);

      expect((await loader(pastDeadline.publicId)).status).toBe(503);
      answer = proxyUnavailable;
      expect((await loader(behindProxy.publicId)).status).toBe(503);
      expect(reads).toBe(2);
      // Answered from the memory of those two failures, without a call.
      for (let i = 0; i < 10; i++) {
        for (const { publicId } of [pastDeadline, behindProxy]) {
          const again = await loader(publicId);
          expect([again.status, again.body]).toEqual([503, UNAVAILABLE]);
        }
      }
      expect(reads).toBe(2);
      // Each cause once, at once: one does not hide the other.
      const deadline = "[deadline_exceeded] the store did not answer in time";
      const proxy = "[unavailable] HTTP 503";
      expect(warnings()).toEqual([
        expect.objectContaining({ msg: OUTAGE, cause: deadline, failedRequests: 1 }),
        expect.objectContaining({
          msg: OUTAGE,
          cause: proxy,
          failedRequests: 1,
        }),
      ]);
      // The requests after them are counted in the next warning of each, though none follows.
      await expect.poll(() => warnings().length, { timeout: 15_000, interval: 200 }).toBe(4);
      expect(warnings().slice(2)).toEqual([
        expect.objectContaining({ msg: OUTAGE, cause: deadline, failedRequests: 10 }),
        expect.objectContaining({
          msg: OUTAGE,
          cause: proxy,
          failedRequests: 10,
        }),
      ]);
      expect(logs.filter((entry) => entry.level === 50)).toEqual([]);
    } finally {
      await gateway.close();
      await relay.close();
      await daemon.close();
    }
  });
});
