import http2 from "node:http2";
import { connect, createServer, type Socket } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { requestHeader } from "@connectrpc/connect/protocol-connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import { fastify } from "fastify";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { loadConfig } from "#daemon/config.js";
import { firstFailure, isDaemonBusy } from "#gateway/daemon-failures.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { httpErrorOf } from "#gateway/errors.js";
import { startGateway } from "#gateway/main.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import {
  Health,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as Status,
} from "#gen/grpc/health/v1/health_pb.js";
import { rawServer } from "#test/support/raw-http2.js";

/** A port nothing listens on (bound, read, released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === "object" && address ? address.port : 0;
}

/** A daemon stand-in serving Health/Check through connect-es on `port` (0: any). */
async function healthDaemon(port = 0) {
  const app = fastify({ http2: true, forceCloseConnections: true });
  await app.register(fastifyConnectPlugin, {
    routes: (router) => router.service(Health, { check: () => ({ status: Status.SERVING }) }),
  });
  await app.listen({ host: "127.0.0.1", port });
  const address = app.server.address();
  return { app, port: typeof address === "object" && address ? address.port : port };
}

/**
 * A TCP relay to `port` whose connections, once `drop()` is called, lose every byte both ways
 * without closing: connections dead somewhere on the network. Later connections pass.
 */
async function blackHoleRelay(port: number) {
  const live: { dropped: boolean; client: Socket }[] = [];
  const relay = createServer((client) => {
    const flow = { dropped: false, client };
    live.push(flow);
    const upstream = connect(port, "127.0.0.1");
    client.on("data", (chunk) => flow.dropped || upstream.write(chunk));
    upstream.on("data", (chunk) => flow.dropped || client.write(chunk));
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("error", () => {});
    upstream.on("error", () => {});
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const address = relay.address();
  return {
    url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`,
    drop: () => {
      for (const flow of live) flow.dropped = true;
    },
    connections: () => live.length,
    close: () =>
      new Promise<void>((resolve) => {
        relay.close(() => resolve());
        // Connections still open would keep close() waiting.
        for (const flow of live) flow.client.destroy();
      }),
  };
}

/** A Health/Check answer as the daemon encodes it. */
const serving = () =>
  toBinary(
    HealthCheckResponseSchema,
    create(HealthCheckResponseSchema, { status: Status.SERVING }),
  );

/** A Headers' entries in its order, as a caller iterating it reads them. */
function entriesOf(headers: Headers): [string, string][] {
  const entries: [string, string][] = [];
  headers.forEach((value, name) => {
    entries.push([name, value]);
  });
  return entries;
}

const failureOf = (call: Promise<unknown>) => call.then(() => undefined, ConnectError.from);

describe("the stand-alone gateway's transport to the daemon", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /**
   * A call the daemon stand-in received and never answers, through a relay that can drop the
   * connection silently; the transport pings every 50 ms and gives up after 200 ms.
   */
  async function callLeftWaiting() {
    const silent = await rawServer(() => {});
    cleanups.push(silent.close);
    const relay = await blackHoleRelay(Number(new URL(silent.url).port));
    cleanups.push(relay.close);
    const health = createClient(
      Health,
      createDaemonTransport({
        baseUrl: relay.url,
        keepAlive: { intervalMs: 50, timeoutMs: 200 },
      }),
    );
    const call = failureOf(health.check({ service: "" }));
    await expect.poll(() => silent.streams.length).toBe(1);
    return { call, relay, silent };
  }

  /**
   * A client whose one connection, idle past its 50 ms, has died silently: the next call's idle
   * check gets no answer (waiting up to `timeoutMs`, at most 2 s).
   */
  async function idleDeadConnection(timeoutMs: number) {
    const daemon = await healthDaemon();
    cleanups.push(() => daemon.app.close());
    const relay = await blackHoleRelay(daemon.port);
    cleanups.push(relay.close);
    const health = createClient(
      Health,
      createDaemonTransport({
        baseUrl: relay.url,
        keepAlive: { intervalMs: 5_000, timeoutMs, idleMs: 50 },
      }),
    );
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    relay.drop();
    await new Promise((resolve) => setTimeout(resolve, 100));
    return { health, relay };
  }

  /** A gateway whose daemon URL names a port nothing listens on. */
  /**
   * A gateway whose daemon's port refuses connections, logging to `logger`, its outage lines
   * `repeatedFailureLogMs` apart (REPEATED_FAILURE_LOG_MS unless given).
   */
  async function gatewayWithoutDaemon(
    logger = pino({ level: "silent" }),
    repeatedFailureLogMs?: number,
  ) {
    const daemonUrl = `http://127.0.0.1:${await closedPort()}`;
    const transport = createDaemonTransport({ baseUrl: daemonUrl });
    const gateway = await startGateway({
      config: loadConfig({ CONSENT_HTTP_PORT: "0", CONSENT_DAEMON_URL: daemonUrl }),
      transport,
      operatorToken: generateOperatorToken(),
      logger,
      repeatedFailureLogMs,
    });
    cleanups.push(() => gateway.close());
    const listBanners = () =>
      fetch(`${gateway.url}/api/v1/banners`, {
        headers: { authorization: "Bearer cs_live_0000000000000000000000000000000000000000" },
      });
    const health = () => fetch(`${gateway.url}/api/v1/health`);
    return { transport, listBanners, health };
  }

  it("fails with UNAVAILABLE when no daemon listens, which the gateway answers with 503", async () => {
    const { transport, listBanners } = await gatewayWithoutDaemon();
    const failure = await failureOf(createClient(Health, transport).check({ service: "" }));
    expect(failure?.code).toBe(Code.Unavailable);
    const response = await listBanners();
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ data: { code: "unavailable" }, version: "v1" });
  });

  it("tells the operator once that the daemon is unreachable, then an interval later how many failed since", async () => {
    // The interval shortened from REPEATED_FAILURE_LOG_MS (10 s); the three requests, each
    // refused at once, fall within it.
    const intervalMs = 3_000;
    const lines: {
      level: number;
      msg: string;
      failedRequests?: number;
      cause?: string;
      err?: unknown;
    }[] = [];
    const { listBanners } = await gatewayWithoutDaemon(
      pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
      intervalMs,
    );
    for (let i = 0; i < 3; i++) expect((await listBanners()).status).toBe(503);
    const warnings = lines.filter((line) => line.level === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      msg: "the daemon could not be reached or has not answered: requests are answered 503",
      failedRequests: 1,
    });
    // The cause once, not repeated by each error in its chain, and no stack.
    expect(warnings[0]?.cause).toMatch(
      /^\[unavailable\] the daemon could not be reached: connect ECONNREFUSED [\d.:]+$/,
    );
    expect(warnings[0]?.err).toBeUndefined();
    // The two held back are reported once the interval is over, though no request follows.
    const warned = Date.now();
    await vi.waitFor(() => expect(lines.filter((line) => line.level === 40)).toHaveLength(2), {
      timeout: intervalMs + 2_000,
      interval: 100,
    });
    expect(Date.now() - warned).toBeGreaterThan(intervalMs - 1_000);
    expect(lines.filter((line) => line.level === 40)[1]).toMatchObject({ failedRequests: 2 });
  });

  it("counts health checks that cannot reach the daemon with the other requests: one warning, not one each", async () => {
    const lines: { level: number; msg: string }[] = [];
    const { health, listBanners } = await gatewayWithoutDaemon(
      pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
    );
    for (let i = 0; i < 4; i++) expect((await health()).status).toBe(503);
    expect((await listBanners()).status).toBe(503);
    expect(lines.filter((line) => line.level === 40)).toEqual([
      expect.objectContaining({
        msg: "the daemon could not be reached or has not answered: requests are answered 503",
      }),
    ]);
  });

  it("names the first failure of a chain, every address of a refused host name, and ends on a loop", () => {
    const refused = new Error("connect ECONNREFUSED 127.0.0.1:9");
    const stream = new Error("The pending stream has been canceled (caused by: …)", {
      cause: refused,
    });
    expect(firstFailure(stream)).toBe("connect ECONNREFUSED 127.0.0.1:9");
    // Node 20 trying a host name's IPv4 and IPv6 addresses: an AggregateError without a message.
    const both = new AggregateError([refused, new Error("connect ECONNREFUSED ::1:9")], "");
    expect(firstFailure(new Error("canceled", { cause: both }))).toBe(
      "connect ECONNREFUSED 127.0.0.1:9; connect ECONNREFUSED ::1:9",
    );
    const looped = new Error("looped");
    looped.cause = looped;
    expect(firstFailure(looped)).toBe("looped");
    expect(firstFailure(Object.assign(new Error(""), { code: "ECONNRESET" }))).toBe("ECONNRESET");
  });

  it("reconnects once a daemon that went away listens again", async () => {
    const first = await healthDaemon();
    const health = createClient(
      Health,
      createDaemonTransport({ baseUrl: `http://127.0.0.1:${first.port}` }),
    );
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    await first.app.close();
    expect((await failureOf(health.check({ service: "" })))?.code).toBe(Code.Unavailable);
    const again = await healthDaemon(first.port);
    cleanups.push(() => again.app.close());
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
  });

  it("gives up at the call's deadline with DEADLINE_EXCEEDED and cancels the stream", async () => {
    const silent = await rawServer(() => {});
    cleanups.push(silent.close);
    const health = createClient(Health, createDaemonTransport({ baseUrl: silent.url }));
    const failure = await failureOf(health.check({ service: "" }, { timeoutMs: 100 }));
    expect(failure?.code).toBe(Code.DeadlineExceeded);
    await expect.poll(() => silent.streams[0]?.closed).toBe(true);
  });

  it("refuses a response larger than readMaxBytes as an internal failure", async () => {
    const large = await rawServer((stream) => {
      stream.respond({ ":status": 200, "content-type": "application/proto" });
      stream.end(Buffer.alloc(64 * 1024));
    });
    cleanups.push(large.close);
    const health = createClient(
      Health,
      createDaemonTransport({ baseUrl: large.url, readMaxBytes: 1024 }),
    );
    expect((await failureOf(health.check({ service: "" })))?.code).toBe(Code.Internal);
  });

  it("fails with UNAVAILABLE when the connection is lost part-way through an answer", async () => {
    // HealthCheckResponse{status: SERVING} is two bytes; the answer promises more, then the
    // daemon's connection is gone.
    const dying = await rawServer((stream) => {
      stream.respond({
        ":status": 200,
        "content-type": "application/proto",
        "content-length": "100",
      });
      stream.write(Buffer.from([0x08, 0x01]), () => stream.session?.destroy());
    });
    cleanups.push(dying.close);
    const health = createClient(Health, createDaemonTransport({ baseUrl: dying.url }));
    expect((await failureOf(health.check({ service: "" })))?.code).toBe(Code.Unavailable);
  });

  it("sends a call the daemon refused unprocessed once more", async () => {
    // Each connection's first stream is refused (as past the daemon's stream limit), the next
    // answered.
    const firstOnConnection = new WeakSet<http2.ServerHttp2Session>();
    let refused = 0;
    const refusing = await rawServer((stream) => {
      const session = stream.session as http2.ServerHttp2Session;
      if (!firstOnConnection.has(session)) {
        firstOnConnection.add(session);
        refused++;
        stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      stream.respond({ ":status": 200, "content-type": "application/proto" });
      stream.end(Buffer.from([0x08, 0x01]));
    });
    cleanups.push(refusing.close);
    const health = createClient(Health, createDaemonTransport({ baseUrl: refusing.url }));
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    expect(refused).toBe(1);
  });

  it("fails a call the daemon resets as over its request budget with UNAVAILABLE, not as unreachable", async () => {
    const busy = await rawServer((stream) => {
      stream.close(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    });
    cleanups.push(busy.close);
    const health = createClient(Health, createDaemonTransport({ baseUrl: busy.url }));
    const failure = await failureOf(health.check({ service: "" }));
    expect([failure?.code, failure?.rawMessage]).toEqual([
      Code.Unavailable,
      "the daemon holds as many requests as it allows",
    ]);
    // A refusal under load, which the gateway does not log as the daemon out of reach.
    expect(isDaemonBusy(failure)).toBe(true);
    // Reset before it was read whole, the call was not carried out: the 503 asks for a retry, as
    // the gateway's own body budget's does; a daemon lost is not told to be back in a second.
    expect(httpErrorOf(failure)).toMatchObject({ status: 503, headers: { "Retry-After": "1" } });
    const lostCall = await failureOf(
      createClient(
        Health,
        createDaemonTransport({ baseUrl: `http://127.0.0.1:${await closedPort()}` }),
      ).check({ service: "" }),
    );
    expect(httpErrorOf(lostCall)).toMatchObject({ status: 503, headers: {} });
  });

  it("takes the daemon's answers while large request bodies wait on the connection for the daemon to read them", async () => {
    // A daemon reading slower than the gateway sends: it has read one call whole and holds the
    // next ones unread (flow control keeps their bodies on the gateway's side of the connection,
    // 64 x 256 KB, past Node's default session memory of 10 MB), then answers the first.
    const CALLS = 64;
    const held: http2.ServerHttp2Stream[] = [];
    let firstRead: http2.ServerHttp2Stream | undefined;
    const sessions: http2.ServerHttp2Session[] = [];
    const server = http2.createServer();
    server.on("session", (session) => sessions.push(session));
    server.on("stream", (stream) => {
      stream.on("error", () => {});
      if (firstRead === undefined) {
        stream.resume();
        stream.on("end", () => {
          firstRead = stream;
        });
      } else held.push(stream);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          for (const session of sessions) session.destroy();
        }),
    );
    const answer = (stream: http2.ServerHttp2Stream) => {
      stream.respond({ ":status": 200, "content-type": "application/proto" });
      stream.end(Buffer.from([0x08, 0x01]));
    };
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    const health = createClient(
      Health,
      createDaemonTransport({ baseUrl: `http://127.0.0.1:${port}` }),
    );

    const first = failureOf(health.check({ service: "" }));
    await expect.poll(() => firstRead !== undefined).toBe(true);
    const large = Array.from({ length: CALLS }, (_, index) =>
      failureOf(health.check({ service: String(index).padEnd(256 * 1024, "x") })),
    );
    await expect.poll(() => held.length).toBe(CALLS);
    answer(firstRead as http2.ServerHttp2Stream);
    expect(await first).toBeUndefined();
    // Then it reads the others and answers each.
    for (const stream of held) {
      stream.resume();
      stream.on("end", () => answer(stream));
    }
    expect(await Promise.all(large)).toEqual(Array(CALLS).fill(undefined));
  });

  it("fails a call HTTP/2 cannot carry as INTERNAL, and keeps the connection for the next", async () => {
    const daemon = await healthDaemon();
    cleanups.push(() => daemon.app.close());
    let connections = 0;
    daemon.app.server.on("session", () => connections++);
    const health = createClient(
      Health,
      createDaemonTransport({ baseUrl: `http://127.0.0.1:${daemon.port}` }),
    );
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    // A connection-specific header is forbidden in HTTP/2: the gateway's mistake, not the daemon's.
    const failure = await failureOf(
      health.check({ service: "" }, { headers: { connection: "keep-alive" } }),
    );
    expect(failure?.code).toBe(Code.Internal);
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    expect(connections).toBe(1);
  });

  it("gives up a connection that stops answering pings while a call waits on it", async () => {
    const { call, relay } = await callLeftWaiting();
    relay.drop();
    expect((await call)?.code).toBe(Code.Unavailable);
  });

  it("keeps watching a connection the daemon told to go away while calls still wait on it", async () => {
    const { call, relay, silent } = await callLeftWaiting();
    // The daemon goes away, promising to finish the call already on the connection; then the
    // connection dies silently.
    const [stream] = silent.streams as [http2.ServerHttp2Stream];
    stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
    await new Promise((resolve) => setTimeout(resolve, 50));
    relay.drop();
    expect((await call)?.code).toBe(Code.Unavailable);
  });

  it("checks a connection idle for a while with one ping, however many calls arrive at once", async () => {
    const daemon = await healthDaemon();
    cleanups.push(() => daemon.app.close());
    let connections = 0;
    let pings = 0;
    daemon.app.server.on("session", (session: http2.ServerHttp2Session) => {
      connections++;
      session.on("ping", () => pings++);
    });
    const health = createClient(
      Health,
      createDaemonTransport({
        baseUrl: `http://127.0.0.1:${daemon.port}`,
        keepAlive: { intervalMs: 5_000, timeoutMs: 10_000, idleMs: 50 },
      }),
    );
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // More calls than the pings Node lets wait for an answer (ten).
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => health.check({ service: "" })),
    );
    expect(answers.every((answer) => answer.status === Status.SERVING)).toBe(true);
    expect({ connections, pings }).toEqual({ connections: 1, pings: 1 });
  });

  it("replaces a connection that went silent while idle before it carries the next call", async () => {
    const { health, relay } = await idleDeadConnection(200);
    const answers = await Promise.all([
      health.check({ service: "" }),
      health.check({ service: "" }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([Status.SERVING, Status.SERVING]);
    expect(relay.connections()).toBe(2);
  });

  it("ends a call's wait for the idle check at its abort or deadline", async () => {
    const { health } = await idleDeadConnection(10_000);
    // The idle check's ping goes unanswered for its 2 s; both calls end well before that.
    const started = Date.now();
    const aborted = failureOf(health.check({ service: "" }, { signal: AbortSignal.timeout(50) }));
    const late = failureOf(health.check({ service: "" }, { timeoutMs: 100 }));
    expect((await aborted)?.code).toBe(Code.Canceled);
    expect((await late)?.code).toBe(Code.DeadlineExceeded);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("gives up every call when told to (a shutdown running out of time), and sends no more", async () => {
    const silent = await rawServer(() => {});
    cleanups.push(silent.close);
    const transport = createDaemonTransport({ baseUrl: silent.url });
    const health = createClient(Health, transport);
    const waiting = failureOf(health.check({ service: "" }));
    await expect.poll(() => silent.streams.length).toBe(1);
    transport.abandonCalls();
    expect(await waiting).toMatchObject({ code: Code.Unavailable });
    expect(await failureOf(health.check({ service: "" }))).toMatchObject({
      code: Code.Unavailable,
      rawMessage: "the gateway is shutting down",
    });
    expect(silent.streams.length).toBe(1);
  });

  it("hands the daemon's headers, trailers and error details to the caller", async () => {
    const app = fastify({ http2: true, forceCloseConnections: true });
    await app.register(fastifyConnectPlugin, {
      routes: (router) =>
        router.service(Health, {
          check(request, ctx) {
            ctx.responseHeader.set("x-ratelimit-limit", "50");
            ctx.responseTrailer.set("x-after", "1");
            if (request.service === "ok") return { status: Status.SERVING };
            throw new ConnectError("slow down", Code.ResourceExhausted, { "x-retry": "9" }, [
              { desc: ErrorInfoSchema, value: { code: "rate_limited", message: "slow down" } },
            ]);
          },
        }),
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    cleanups.push(() => app.close());
    const address = app.server.address();
    const port = typeof address === "object" && address ? address.port : 0;
    const health = createClient(
      Health,
      createDaemonTransport({ baseUrl: `http://127.0.0.1:${port}` }),
    );
    const seen: Record<string, string | null> = {};
    await health.check(
      { service: "ok" },
      {
        onHeader: (header) => {
          seen.header = header.get("x-ratelimit-limit");
        },
        onTrailer: (trailer) => {
          seen.trailer = trailer.get("x-after");
        },
      },
    );
    expect(seen).toEqual({ header: "50", trailer: "1" });
    const failure = await failureOf(health.check({ service: "no" }));
    expect(failure?.code).toBe(Code.ResourceExhausted);
    expect(failure?.rawMessage).toBe("slow down");
    expect(failure?.metadata.get("x-retry")).toBe("9");
    expect(failure?.metadata.get("x-ratelimit-limit")).toBe("50");
    expect(failure?.findDetails(ErrorInfoSchema)[0]?.code).toBe("rate_limited");
  });

  it("sends the daemon the request headers connect-es makes of the caller's, however given", async () => {
    const received: http2.IncomingHttpHeaders[] = [];
    const daemon = await rawServer((stream, headers) => {
      received.push(headers);
      const body = serving();
      stream.respond({ ":status": 200, "content-type": "application/proto" });
      stream.end(body);
    });
    cleanups.push(daemon.close);
    const health = createClient(Health, createDaemonTransport({ baseUrl: daemon.url }));
    const relayed = {
      "consent-client-ip": "203.0.113.7",
      "consent-gateway-token": "consent_op_token",
      authorization: "Bearer ck_live_key",
    };
    const calls: { headers?: HeadersInit; timeoutMs?: number }[] = [
      { headers: relayed },
      { headers: { ...relayed, "user-agent": "relay/1", "content-type": "text/plain" } },
      { headers: { "X-Capital": " padded ", "connect-protocol-version": "7" } },
      { headers: new Headers(relayed) },
      { headers: [["consent-origin", "https://shop.example"]] },
      { headers: relayed, timeoutMs: 5_000 },
      {},
    ];
    for (const options of calls) await health.check({ service: "" }, options);
    const sent = received.map((headers) =>
      Object.fromEntries(Object.entries(headers).filter(([name]) => !name.startsWith(":"))),
    );
    const made = calls.map(({ headers, timeoutMs }) =>
      Object.fromEntries(entriesOf(requestHeader("unary", true, timeoutMs, headers, true))),
    );
    // The deadline left when the call went out, a millisecond or two under the one given.
    const timeout = Number(sent[5]?.["connect-timeout-ms"]);
    expect(timeout).toBeGreaterThan(4_000);
    expect(timeout).toBeLessThanOrEqual(5_000);
    (made[5] as Record<string, string>)["connect-timeout-ms"] = String(timeout);
    expect(sent).toEqual(made);
    expect(received.map((headers) => headers[":path"])).toEqual(
      calls.map(() => "/grpc.health.v1.Health/Check"),
    );
  });

  it("hands the caller an answer's header fields as its header, and no trailer when none came", async () => {
    const daemon = await rawServer((stream) => {
      const body = serving();
      stream.respond({
        ":status": 200,
        "content-type": "application/proto",
        "x-ratelimit-remaining": "49",
        "set-cookie": ["a=1", "b=2"],
        "trailer-x-after": "2",
      });
      stream.end(body);
    });
    cleanups.push(daemon.close);
    const quiet = await rawServer((stream) => {
      const body = serving();
      stream.respond({ ":status": 200, "content-type": "application/proto", "x-one": "1" });
      stream.end(body);
    });
    cleanups.push(quiet.close);
    const seen: [string, string][][] = [];
    for (const url of [daemon.url, quiet.url]) {
      const health = createClient(Health, createDaemonTransport({ baseUrl: url }));
      await health.check(
        { service: "" },
        {
          onHeader: (header) => {
            seen.push(entriesOf(header).filter(([name]) => name !== "date"));
          },
          onTrailer: (trailer) => {
            seen.push(entriesOf(trailer));
          },
        },
      );
    }
    expect(seen).toEqual([
      [
        ["content-type", "application/proto"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
        ["x-ratelimit-remaining", "49"],
      ],
      [["x-after", "2"]],
      [
        ["content-type", "application/proto"],
        ["x-one", "1"],
      ],
      [],
    ]);
  });

  it("reads an answer that is not the Connect protocol's (a proxy's 502) as UNAVAILABLE", async () => {
    const proxy = await rawServer((stream) => {
      stream.respond({ ":status": 502, "content-type": "text/plain" });
      stream.end("Bad Gateway");
    });
    cleanups.push(proxy.close);
    const health = createClient(Health, createDaemonTransport({ baseUrl: proxy.url }));
    expect((await failureOf(health.check({ service: "" })))?.code).toBe(Code.Unavailable);
  });
});
