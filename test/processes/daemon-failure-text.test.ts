import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, it } from "vitest";
import { STALE_RETRY_MS } from "#gateway/loader/stale-if-error.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import {
  PROGRAMS,
  type Program,
  STANDALONE_GATEWAY_URL,
  startProgram,
  useProgramRoot,
} from "#test/support/processes.js";

/** Text no answer of the gateway may carry: it stands for a library's, a proxy's or Node's words. */
const FOREIGN = "library-text-7f3a";

/** How the stand-in daemon answers the REST routes' calls. */
type Misbehaviour = (stream: http2.ServerHttp2Stream) => void;

/** A Connect unary error as a daemon or a proxy writes it: HTTP status, JSON, no ErrorInfo. */
const connectError =
  (status: number, code: string, details: unknown[] = []): Misbehaviour =>
  (stream) => {
    stream.respond({ ":status": status, "content-type": "application/json" });
    stream.end(JSON.stringify({ code, message: `${code}: ${FOREIGN}`, details }));
  };

/** An ErrorInfo detail in the Connect protocol's JSON, as the daemon sends one. */
const errorInfoDetail = (code: string, retryAfterSeconds = 0) => ({
  type: ErrorInfoSchema.typeName,
  value: Buffer.from(
    toBinary(ErrorInfoSchema, create(ErrorInfoSchema, { code, retryAfterSeconds })),
  )
    .toString("base64")
    .replace(/=+$/, ""),
});

/** A failure no daemon raised on purpose: 500 internal_error. */
const INTERNAL = { status: 500, code: "internal_error", error: "Internal server error" };
/**
 * A failure of the call itself (reset, lost, a deadline, a proxy's 503): retried shortly; the
 * loader's Retry-After for a banner it never served is the seconds until it asks the daemon for
 * it again (failed-reads.ts), STALE_RETRY_MS unless the daemon asked for a retry sooner.
 */
const UNAVAILABLE = {
  status: 503,
  code: "unavailable",
  error: "The service is temporarily unavailable; retry later",
  retryAfter: "1",
  loaderRetryAfter: String(STALE_RETRY_MS / 1_000),
};

/** What the operator reads in the gateway's log of a call that failed so. */
const FOREIGN_LOGGED = new RegExp(FOREIGN);
const LOST = /the daemon closed the call|could not be reached/;

const CASES: [string, Misbehaviour, typeof INTERNAL | typeof UNAVAILABLE, RegExp | undefined][] = [
  ["not_found without ErrorInfo", connectError(404, "not_found"), INTERNAL, FOREIGN_LOGGED],
  [
    "invalid_argument without ErrorInfo",
    connectError(400, "invalid_argument"),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "permission_denied without ErrorInfo",
    connectError(403, "permission_denied"),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "failed_precondition without ErrorInfo",
    connectError(400, "failed_precondition"),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  ["aborted without ErrorInfo", connectError(409, "aborted"), INTERNAL, FOREIGN_LOGGED],
  [
    "resource_exhausted without ErrorInfo",
    connectError(429, "resource_exhausted"),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "unauthenticated without ErrorInfo",
    connectError(401, "unauthenticated"),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "not_found with an ErrorInfo that has no code",
    connectError(404, "not_found", [errorInfoDetail("")]),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "unknown with an ErrorInfo",
    connectError(500, "unknown", [errorInfoDetail("not_found")]),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "unimplemented (a daemon of another version)",
    connectError(501, "unimplemented"),
    INTERNAL,
    FOREIGN_LOGGED,
  ],
  [
    "a proxy's HTTP 403 in text",
    (stream) => {
      stream.respond({ ":status": 403, "content-type": "text/plain" });
      stream.end(FOREIGN);
    },
    INTERNAL,
    /HTTP 403/,
  ],
  [
    "an answer over the gateway's readMaxBytes",
    (stream) => {
      stream.respond({
        ":status": 200,
        "content-type": "application/proto",
        "content-length": String(2 ** 30),
      });
      stream.write(Buffer.alloc(1024));
    },
    INTERNAL,
    /readMaxBytes/,
  ],
  [
    "a malformed answer",
    (stream) => {
      stream.respond({ ":status": 200, "content-type": "application/proto" });
      stream.end(Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f]));
    },
    INTERNAL,
    /parse binary/,
  ],
  [
    "deadline_exceeded without ErrorInfo",
    connectError(504, "deadline_exceeded"),
    UNAVAILABLE,
    FOREIGN_LOGGED,
  ],
  // No failure the daemon raises on purpose has this code (decisions §7): a deadline that passed
  // is the service briefly unavailable, whatever detail came with it, to be asked again after the
  // Retry-After the detail asks for, if any.
  [
    "deadline_exceeded with an ErrorInfo",
    connectError(504, "deadline_exceeded", [errorInfoDetail("deadline_exceeded")]),
    UNAVAILABLE,
    FOREIGN_LOGGED,
  ],
  [
    "deadline_exceeded with an ErrorInfo asking for a retry in 2 s",
    connectError(504, "deadline_exceeded", [errorInfoDetail("deadline_exceeded", 2)]),
    { ...UNAVAILABLE, retryAfter: "2", loaderRetryAfter: "2" },
    FOREIGN_LOGGED,
  ],
  ["unavailable without ErrorInfo", connectError(503, "unavailable"), UNAVAILABLE, FOREIGN_LOGGED],
  [
    "RST_STREAM before an answer",
    (stream) => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR),
    UNAVAILABLE,
    LOST,
  ],
  // Warned of with the reset above: at most one warning per 10 s while the daemon is lost.
  ["the connection reset", (stream) => stream.session?.destroy(), UNAVAILABLE, undefined],
];

/**
 * The cases on stand-alone gateways side by side, each gateway with a stand-in daemon of its own
 * and its cases one after another. A gateway that warned of a 503's cause holds its next warning
 * in the same words back for 10 s (outage-log.ts), which a case of those words waited out after
 * the case before it on the same gateway: the deadlines passed, whose failures the gateway logs
 * in the same words, are on gateways of their own.
 */
const ON_A_GATEWAY_OF_THEIR_OWN = [
  "deadline_exceeded with an ErrorInfo",
  "deadline_exceeded with an ErrorInfo asking for a retry in 2 s",
];
const GATEWAYS = [
  CASES.filter(([name]) => !ON_A_GATEWAY_OF_THEIR_OWN.includes(name)),
  ...ON_A_GATEWAY_OF_THEIR_OWN.map((name) => CASES.filter(([caseName]) => caseName === name)),
];

/**
 * spec 7, decisions §5: whatever a daemon, a proxy in front of it or the HTTP/2 client says of a
 * failure that carries no ErrorInfo of the daemon's, a REST client reads only the gateway's own
 * sentence and one of spec 7's codes, in its route's shape; the gateway logs the original text.
 * The loader (decisions §6) answers the same status and body for a banner it never served: a
 * NOT_FOUND without the daemon's ErrorInfo is no answer that the banner is unknown.
 */
describe("a stand-alone gateway's answers for daemon failures it did not expect", () => {
  useProgramRoot("consent-failure-text-");
  describe.each(GATEWAYS.map((cases, index) => ({ gateway: index + 1, cases })))(
    "on gateway $gateway",
    { concurrent: true },
    ({ cases }) => gatewayAnswering(cases),
  );
});

/** A stand-in daemon and a stand-alone gateway calling it, for `cases`, one after another. */
function gatewayAnswering(cases: typeof CASES): void {
  let daemon: http2.Http2Server;
  const sessions = new Set<http2.ServerHttp2Session>();
  let misbehave: Misbehaviour = connectError(404, "not_found");
  let gateway: Program;
  let gatewayUrl = "";

  beforeAll(async () => {
    // A stand-in daemon: it accepts the gateway's token (the probe's team is not found) and
    // answers every other call as the case at hand says.
    daemon = http2.createServer();
    daemon.on("session", (session) => {
      sessions.add(session);
      session.on("close", () => sessions.delete(session));
      session.on("error", () => {});
    });
    daemon.on("stream", (stream, headers) => {
      stream.on("error", () => {});
      stream.resume();
      stream.on("end", () => {
        if (String(headers[":path"]).endsWith("/GetTeam")) {
          connectError(404, "not_found", [errorInfoDetail("not_found")])(stream);
        } else misbehave(stream);
      });
    });
    await new Promise<void>((resolve) => daemon.listen(0, "127.0.0.1", resolve));
    const port = (daemon.address() as { port: number }).port;
    gateway = startProgram(PROGRAMS.gateway, {
      CONSENT_ADMIN_TOKEN: "stand-in-operator-token-of-32-chars",
      CONSENT_DAEMON_URL: `http://127.0.0.1:${port}`,
    });
    gatewayUrl = await gateway.waitFor(STANDALONE_GATEWAY_URL);
  });
  afterAll(async () => {
    await gateway?.stop();
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => daemon.close(resolve));
  });

  // One after another: the cases share this gateway, and `misbehave` says how its daemon answers.
  // The test's own `expect`: the cases of other gateways run meanwhile (expect.poll below).
  it.sequential.for(cases)(
    "%s: the gateway's own words, one of spec 7's codes, the original logged",
    async ([, behaviour, expected, originalText], { expect }) => {
      misbehave = behaviour;
      const logged = gateway.stdout().length + gateway.stderr().length;
      const { status, code, error, retryAfter, loaderRetryAfter } = {
        retryAfter: null,
        loaderRetryAfter: null,
        ...expected,
      };

      const listed = await fetch(`${gatewayUrl}/api/v1/banners`, {
        headers: { authorization: "Bearer ck_live_stand_in" },
      });
      expect([listed.status, listed.headers.get("retry-after"), await listed.json()]).toEqual([
        status,
        retryAfter,
        { data: { error, code }, version: "v1" },
      ]);

      const posted = await fetch(`${gatewayUrl}/api/consent/log`, {
        method: "POST",
        headers: { "content-type": "text/plain", origin: "https://shop.example" },
        body: "{}",
      });
      expect([posted.status, posted.headers.get("retry-after"), await posted.json()]).toEqual([
        status,
        retryAfter,
        { success: false, error, code },
      ]);

      // A banner never read before, so that its read meets this case's failure.
      const loader = await fetch(`${gatewayUrl}/loader/${randomUUID()}.js`);
      expect([
        loader.status,
        loader.headers.get("retry-after"),
        loader.headers.get("content-type"),
        loader.headers.get("cache-control"),
        await loader.json(),
      ]).toEqual([
        status,
        loaderRetryAfter,
        "application/json; charset=utf-8",
        "no-store",
        { error, code },
      ]);

      const page = await fetch(`${gatewayUrl}/preferences/some-token`);
      const html = await page.text();
      expect([page.status, page.headers.get("retry-after")]).toEqual([status, retryAfter]);
      expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(html).not.toContain(FOREIGN);
      expect(html).not.toMatch(/HTTP 40|readMaxBytes|parse binary|unimplemented/i);

      // The operator reads what the client was not told; a 503 in the words of one warned of
      // within the last 10 s (the case before) in the next warning of those words, 10 s after it.
      if (originalText) {
        await expect
          .poll(() => (gateway.stdout() + gateway.stderr()).slice(logged), { timeout: 12_000 })
          .toMatch(originalText);
      }
    },
  );
}
