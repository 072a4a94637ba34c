import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { credentials, status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_STREAMS_PER_CONNECTION } from "#daemon/server.js";
import { GetBannerRequestSchema } from "#gen/consent/v1/banner_pb.js";
import { bulkyTexts, createBanner, createTeam, mintKey } from "#test/support/api.js";
import { addressOf, loadConsentProtos, unary } from "#test/support/grpc-js.js";
import {
  answeredEarly,
  grpcFrame,
  grpcWebTrailers,
  openHealthCall,
  rawRequest,
} from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** A gRPC call that sends `sent` and never ends its request: its RST_STREAM code once closed. */
async function stalledUntilClosed(session: http2.ClientHttp2Session, path: string, sent: Buffer) {
  const stalled = session.request({
    ":method": "POST",
    ":path": path,
    "content-type": "application/grpc",
  });
  stalled.write(sent);
  return new Promise<number>((resolve) => {
    stalled.on("error", () => {});
    stalled.on("close", () => resolve(stalled.rstCode ?? -1));
  });
}

/** One gRPC message of `size` zero bytes, past the daemon's 1 MiB. */
function oversizedMessage(size = 3_000_000): Buffer {
  return grpcFrame(Buffer.alloc(size));
}

/**
 * The daemon's h2c port holds a request before any credential is checked, so what one client
 * can make it hold is bounded: streams per connection, and the time a request has to arrive.
 */
describe("the daemon port's bounds on what a client makes it hold", () => {
  let service: TestService;
  const arrivalMs = 500;
  const logged: Record<string, unknown>[] = [];
  beforeAll(async () => {
    service = await startTestService({
      requestArrivalMs: arrivalMs,
      onLog: (entry) => logged.push(entry),
    });
  });
  afterAll(() => service.close());

  it("announces at most MAX_STREAMS_PER_CONNECTION streams at once", async () => {
    const session = http2.connect(service.daemonUrl);
    try {
      const settings = await new Promise<http2.Settings>((resolve) =>
        session.once("remoteSettings", resolve),
      );
      expect(settings.maxConcurrentStreams).toBe(MAX_STREAMS_PER_CONNECTION);
    } finally {
      session.close();
    }
  });

  it("resets a call whose request stops arriving, and keeps serving the connection", async () => {
    const session = http2.connect(service.daemonUrl);
    try {
      const headers = {
        ":method": "POST",
        ":path": "/consent.v1.SubjectService/ResolveSubject",
        "content-type": "application/grpc",
      };
      // An envelope announcing 1,000 bytes, then 10 of them, and never the rest.
      const started = Date.now();
      const closed = await stalledUntilClosed(
        session,
        headers[":path"],
        grpcFrame(Buffer.alloc(10), 1_000),
      );
      expect(closed).toBe(http2.constants.NGHTTP2_CANCEL);
      expect(Date.now() - started).toBeGreaterThanOrEqual(arrivalMs - 50);

      // The same connection still answers a whole request: no credential, so UNAUTHENTICATED.
      const whole = session.request(headers);
      whole.end(grpcFrame());
      const status = await new Promise<string | undefined>((resolve) => {
        whole.on("trailers", (trailers) => resolve(String(trailers["grpc-status"])));
        whole.on("response", (received) => {
          if (received["grpc-status"] !== undefined) resolve(String(received["grpc-status"]));
        });
        whole.resume();
      });
      expect(status).toBe("16");
    } finally {
      session.close();
    }
  });

  it("resets a server stream whose request stops arriving, logging nothing of it", async () => {
    const session = http2.connect(service.daemonUrl);
    try {
      // The tail's one message, whole, but the request never ended (no END_STREAM).
      const closed = await stalledUntilClosed(
        session,
        "/consent.v1.ConsentLogService/TailConsentLogs",
        grpcFrame(),
      );
      expect(closed).toBe(http2.constants.NGHTTP2_CANCEL);
      // The caller's stall is not the daemon's failure: no "unexpected error" with a stack. A
      // whole call answered after it: the daemon has handled the reset's aftermath by then.
      const after = await rawRequest(
        service.daemonUrl,
        "/grpc.health.v1.Health/Check",
        { "content-type": "application/grpc", te: "trailers" },
        grpcFrame(),
      );
      expect(after.trailers["grpc-status"]).toBe("0");
      const ofTail = logged.filter((entry) => entry.procedure === "TailConsentLogs");
      expect(ofTail.map((entry) => entry.msg)).toEqual([]);
    } finally {
      session.close();
    }
  });

  it("answers an empty grpc-timeout with INVALID_ARGUMENT and a message the caller can read", async () => {
    const reply = await rawRequest(
      service.daemonUrl,
      "/grpc.health.v1.Health/Check",
      { "content-type": "application/grpc", te: "trailers", "grpc-timeout": "" },
      grpcFrame(),
    );
    expect(reply.trailers["grpc-status"]).toBe("3");
    // connect-es' message ends in a space, which a header value cannot: sent as %20.
    expect(decodeURI(String(reply.trailers["grpc-message"]))).toMatch(/timeout/);
  });

  // RFC 9113 §8.1: an answer sent before its request ended is followed by RST_STREAM NO_ERROR,
  // so the client stops sending; the answer is not lost to the reset. Without it the client
  // would wait for the arrival bound, whose reset is CANCEL.
  it("answers a gRPC message past its limit, then tells the client to stop sending", async () => {
    const path = "/grpc.health.v1.Health/Check";
    const grpc = await answeredEarly(
      service.daemonUrl,
      { ":path": path, "content-type": "application/grpc", te: "trailers" },
      oversizedMessage(),
    );
    expect([grpc.trailers["grpc-status"], grpc.rstCode]).toEqual([
      "8",
      http2.constants.NGHTTP2_NO_ERROR,
    ]);
    const grpcWeb = await answeredEarly(
      service.daemonUrl,
      { ":path": path, "content-type": "application/grpc-web+proto" },
      oversizedMessage(),
    );
    expect([grpcWebTrailers(grpcWeb.body)["grpc-status"], grpcWeb.rstCode]).toEqual([
      "8",
      http2.constants.NGHTTP2_NO_ERROR,
    ]);
  });

  it.each([
    ["the short way", {}],
    ["connect-es", { "connect-timeout-ms": "10000" }],
  ])(
    "answers a Connect body past its limit sent without a length (%s), then resets",
    async (_, extra) => {
      const connect = await answeredEarly(
        service.daemonUrl,
        {
          ":path": "/consent.v1.AdminService/ListTeams",
          "content-type": "application/proto",
          "connect-protocol-version": "1",
          ...extra,
        },
        Buffer.alloc(3_000_000),
      );
      expect(connect.response[":status"]).toBe(429);
      expect(JSON.parse(connect.body.toString()).code).toBe("resource_exhausted");
      expect(connect.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    },
  );

  it("leaves a server stream that outlives the deadline alone once its request has arrived", async () => {
    const session = http2.connect(service.daemonUrl);
    try {
      const watch = session.request({
        ":method": "POST",
        ":path": "/grpc.health.v1.Health/Watch",
        "content-type": "application/grpc",
      });
      watch.end(grpcFrame());
      const messages: Buffer[] = [];
      watch.on("data", (chunk: Buffer) => messages.push(chunk));
      await new Promise((resolve) => setTimeout(resolve, arrivalMs * 3));
      expect(watch.closed).toBe(false);
      expect(messages.length).toBeGreaterThan(0);
      watch.close(http2.constants.NGHTTP2_CANCEL);
    } finally {
      session.close();
    }
  });
});

/** A server stream's end as the wire tells it: grpc-status from the trailers, after how long. */
async function watchEnd(url: string, service: string, grpcTimeout: string, cancelAfterMs: number) {
  const session = http2.connect(url);
  try {
    const name = Buffer.from(service);
    // HealthCheckRequest { service = 1 }: field 1, length-delimited.
    const message = Buffer.concat([Buffer.from([0x0a, name.length]), name]);
    const stream = session.request({
      ":method": "POST",
      ":path": "/grpc.health.v1.Health/Watch",
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": grpcTimeout,
    });
    stream.end(grpcFrame(message));
    const started = Date.now();
    stream.resume();
    return await new Promise<{ status: string; afterMs: number }>((resolve) => {
      const cancel = setTimeout(() => {
        resolve({ status: "still open", afterMs: Date.now() - started });
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, cancelAfterMs);
      stream.on("trailers", (trailers) => {
        clearTimeout(cancel);
        resolve({ status: String(trailers["grpc-status"]), afterMs: Date.now() - started });
      });
    });
  } finally {
    session.close();
  }
}

describe("server streams on the daemon port", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(() => service.close());

  it("end at the caller's deadline with DEADLINE_EXCEEDED, never OK", async () => {
    const ended = await watchEnd(service.daemonUrl, "", "300m", 5_000);
    expect(ended.status).toBe(String(4));
    expect(ended.afterMs).toBeLessThan(2_000);
  });

  it("run on under a deadline longer than a timer keeps (99999999H), rather than ending at once", async () => {
    const ended = await watchEnd(service.daemonUrl, "", "99999999H", 1_000);
    expect(ended.status).toBe("still open");
  });

  it("keep a watch of an unknown service open, as grpc.health.v1 says, until its deadline", async () => {
    const ended = await watchEnd(service.daemonUrl, "no.such.Service", "300m", 5_000);
    expect(ended.status).toBe(String(4));
    expect(ended.afterMs).toBeGreaterThanOrEqual(250);
  });
});

/** Requests are read before any credential is checked: what they hold at once is bounded. */
describe("the daemon port's budget for request bytes in flight", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ requestBudgetBytes: 64 * 1024 });
  });
  afterAll(() => service.close());

  it("refuses a call with RESOURCE_EXHAUSTED while other requests hold the budget, and serves it once they are gone", async () => {
    const { grpc } = loadConsentProtos();
    const health = new grpc.health.v1.Health(
      addressOf(service.daemonUrl),
      credentials.createInsecure(),
    );
    // 10 KB of request: a service name no daemon serves, so an answer read is NOT_FOUND.
    const check = () => unary(health, "Check", { service: "x".repeat(10 * 1024) });
    // A client that announced a 100 KB message and has sent 60 KB of it, then waits.
    const session = http2.connect(service.daemonUrl);
    const hog = openHealthCall(session, "Check");
    hog.write(grpcFrame(Buffer.alloc(60 * 1024), 100 * 1024));
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const refused = await check();
      expect(refused.ok ? "answered" : refused.error.code).toBe(status.RESOURCE_EXHAUSTED);
    } finally {
      hog.close();
      session.close();
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    const served = await check();
    expect(served.ok ? "answered" : served.error.code).toBe(status.NOT_FOUND);
    health.close();
  });
});

/**
 * Answers a client has not read yet wait in the daemon's HTTP/2 session (flow control holds them
 * back): a stand-alone gateway's one connection carries every REST request at once.
 */
describe("the daemon port's answers waiting on a connection", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
  });
  afterAll(() => service.close());

  it("takes new calls while large answers wait for the client to read them (more than Node's default 10 MB)", async () => {
    const { key } = await mintKey(service, await createTeam(service, "enterprise"));
    // About 210 KB of banner.
    const { id } = await createBanner(service, key, { configuration: { texts: bulkyTexts() } });
    // A client that reads no answer data yet: every answer stays queued in the daemon.
    const session = http2.connect(service.daemonUrl, { settings: { initialWindowSize: 0 } });
    session.on("error", () => {});
    const getBanner = () =>
      new Promise<string>((resolve) => {
        const stream = session.request({
          ":method": "POST",
          ":path": "/consent.v1.BannerService/GetBanner",
          "content-type": "application/proto",
          authorization: `Bearer ${key}`,
        });
        stream.on("error", () => {});
        stream.on("response", (headers) => resolve(String(headers[":status"])));
        stream.on("close", () => resolve(`reset ${stream.rstCode}`));
        stream.end(toBinary(GetBannerRequestSchema, create(GetBannerRequestSchema, { id })));
      });
    try {
      // 64 answers of about 210 KB each, unread; then one call more.
      const answered = await Promise.all(Array.from({ length: 64 }, getBanner));
      expect(answered).toEqual(Array(64).fill("200"));
      expect(await getBanner()).toBe("200");
    } finally {
      session.destroy();
    }
  });
});
