import http2 from "node:http2";
import { connect } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { generateApiKey } from "#daemon/keys/api-key-format.js";
import { buildGateway, type GatewayOptions } from "#gateway/app.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { errorPage } from "#gateway/preferences/page.js";
import { BannerSchema, ListBannersResponseSchema } from "#gen/consent/v1/banner_pb.js";
import { rawConnection, rawExchange } from "#test/support/raw-http1.js";

/** A banner list as a client writes it on a raw connection (a key the daemon judges). */
const LIST_REQUEST =
  "GET /api/v1/banners HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ck_live_x\r\n\r\n";

/**
 * A gateway on a free port whose daemon cannot be reached (a request that reaches a route is
 * answered 503 for it), with `options` of its own; returns it and its port.
 */
async function listeningGateway(options: Partial<GatewayOptions>) {
  const app = await buildGateway({
    transport: createDaemonTransport({ baseUrl: "http://127.0.0.1:9" }),
    operatorToken: generateOperatorToken(),
    trustProxy: [],
    logger: pino({ level: "silent" }),
    ...options,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, port: (app.server.address() as { port: number }).port };
}

/** Requests no route sees: Node refuses them while parsing, or they never finish arriving. */
describe("the gateway's answers to requests it cannot read", () => {
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let port: number;
  beforeAll(async () => {
    // None of these requests reaches a route.
    ({ app, port } = await listeningGateway({ requestTimeoutMs: 1_000 }));
  });
  afterAll(() => app.close());

  it("400 invalid_request in the error envelope, with Date, for a request Node cannot parse", async () => {
    for (const request of [
      "GET /api/v1/health HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
      "NOT A REQUEST LINE\r\n\r\n",
    ]) {
      const answer = await rawExchange(port, (write) => write(request));
      expect(answer.status).toBe(400);
      expect(answer.headers).toContain("content-type: application/json; charset=utf-8");
      expect(answer.headers).toContain("connection: close");
      expect(answer.headers).toContain(`content-length: ${Buffer.byteLength(answer.body)}`);
      const date = /\r\ndate: ([^\r]+)/.exec(answer.headers)?.[1] ?? "";
      expect(Math.abs(Date.parse(date) - Date.now())).toBeLessThan(5_000);
      // No version headers: no route of the versioned API answered (spec 9.4).
      expect(answer.headers).not.toContain("api-version");
      expect(JSON.parse(answer.body)).toEqual({
        data: { error: "The request could not be read", code: "invalid_request" },
        version: "v1",
      });
    }
  });

  it("405 with an empty Allow for CONNECT: the gateway is not a proxy", async () => {
    const answer = await rawExchange(port, (write) =>
      write("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
    );
    expect(answer.status).toBe(405);
    expect(answer.headers).toMatch(/\r\nallow: \r\n/);
    expect(answer.headers).toContain("connection: close");
    expect(JSON.parse(answer.body)).toEqual({
      error: "Method CONNECT is not allowed: this is not a proxy",
      code: "method_not_allowed",
    });
  });

  it("431 for headers over Node's 16 KB", async () => {
    const answer = await rawExchange(port, (write) =>
      write(`GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`),
    );
    expect(answer.status).toBe(431);
    expect(JSON.parse(answer.body)).toMatchObject({ data: { code: "invalid_request" } });
  });

  it("408 and a closed connection when a body stops arriving, instead of a held socket", async () => {
    const answer = await rawExchange(port, (write) =>
      write(
        "POST /api/v1/consent/subjects/resolve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
      ),
    );
    expect(answer.status).toBe(408);
    expect(JSON.parse(answer.body)).toEqual({
      data: { error: "The request was not received in time", code: "invalid_request" },
      version: "v1",
    });
  });

  // Regression: each was answered in the versioned API's envelope, whatever its path, where the
  // log route answers `{ success: false, error, code }` and the loader `{ error, code }`.
  it("400, 431 and 408 in the shape of the route family the request line names, the envelope where it cannot be read", async () => {
    const big = `X-Big: ${"a".repeat(20_000)}\r\n`;
    const loader = "/loader/0b7c2f7e-2d0a-4c55-9d8e-5b1f0c3a9e11.js";
    const unreadable = "The request could not be read";
    const tooLarge = "The request headers are too large";
    const late = "The request was not received in time";
    const log = (error: string) => ({ success: false, error, code: "invalid_request" });
    const plain = (error: string) => ({ error, code: "invalid_request" });
    const v1 = (error: string) => ({ data: { error, code: "invalid_request" }, version: "v1" });
    const cases: [string[], number, object][] = [
      [
        ["POST /api/consent/log HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n"],
        400,
        log(unreadable),
      ],
      // The target in absolute-form names the same path, the query aside.
      [
        ["POST http://x/api/consent/log?a=1 HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n"],
        400,
        log(unreadable),
      ],
      [[`GET ${loader} HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n`], 400, plain(unreadable)],
      [
        ["GET /no/such/path HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n"],
        400,
        plain(unreadable),
      ],
      [["GET /api/v1/banners HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n"], 400, v1(unreadable)],
      [[`POST /api/consent/log HTTP/1.1\r\nHost: x\r\n${big}\r\n`], 431, log(tooLarge)],
      [[`GET ${loader} HTTP/1.1\r\nHost: x\r\n${big}\r\n`], 431, plain(tooLarge)],
      // A body that stops arriving: its request was read, and its path with it.
      [
        [
          "POST /api/consent/log HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n{",
        ],
        408,
        log(late),
      ],
      // The request line came in a packet before the one that failed, or the head never ended:
      // nothing says whose the request was.
      [["POST /api/consent/log HTTP/1.1\r\nHost: x\r\n", `${big}\r\n`], 431, v1(tooLarge)],
      [["POST /api/consent/log HTTP/1.1\r\nHost: x\r\n"], 408, v1(late)],
      [["NOT A REQUEST LINE\r\n\r\n"], 400, v1(unreadable)],
    ];
    for (const [packets, status, body] of cases) {
      const answer = await rawExchange(port, async (write) => {
        for (const packet of packets) {
          write(packet);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      });
      expect([packets[0]?.split("\r\n")[0], answer.status, JSON.parse(answer.body)]).toEqual([
        packets[0]?.split("\r\n")[0],
        status,
        body,
      ]);
      // Whatever the shape, the headers of every such answer, and none of a route's.
      expect(answer.headers).toContain("cache-control: no-store");
      expect(answer.headers).toContain("connection: close");
      expect(answer.headers).toContain(`content-length: ${Buffer.byteLength(answer.body)}`);
      expect(answer.headers).not.toContain("api-version");
    }
  });

  // Regression: under /preferences/ a visitor was shown `{ error, code }` JSON, where every other
  // answer of the page is an HTML page in the visitor's language with the page's headers.
  it("400, 431 and 408 under /preferences/ as the page's failure page, in the language read before the failure, with the page's headers", async () => {
    const page = "/preferences/tok3n";
    const big = `X-Big: ${"a".repeat(20_000)}\r\n`;
    const form = "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n";
    const cases: [string, number, string, boolean][] = [
      // Oversized cookies on a visit: the language was read before the overflow.
      [`GET ${page} HTTP/1.1\r\nHost: x\r\nAccept-Language: de-CH\r\n${big}\r\n`, 431, "de", false],
      [
        `POST ${page} HTTP/1.1\r\nHost: x\r\nAccept-Language: fr\r\nBad Header Line\r\n\r\n`,
        400,
        "fr",
        true,
      ],
      // After the line that failed nothing is read: English, as for no Accept-Language.
      [
        `GET ${page} HTTP/1.1\r\nHost: x\r\nBad Header Line\r\nAccept-Language: de\r\n\r\n`,
        400,
        "en",
        false,
      ],
      // A form whose body stops arriving: its head was read whole.
      [
        `POST ${page} HTTP/1.1\r\nHost: x\r\nAccept-Language: es\r\n${form}\r\ncategory=a`,
        408,
        "es",
        true,
      ],
    ];
    for (const [request, status, lang, submitted] of cases) {
      const answer = await rawExchange(port, (write) => write(request));
      const html = Buffer.from(answer.body, "latin1").toString("utf8");
      const csp = /\r\ncontent-security-policy: ([^\r]*)/.exec(answer.headers)?.[1] ?? "";
      const nonce = /style-src 'nonce-([^']+)'/.exec(csp)?.[1] ?? "";
      // The nonce is read from the lower-cased head: the body's own says which case it has.
      const bodyNonce = /<style nonce="([^"]+)">/.exec(html)?.[1] ?? "";
      expect(bodyNonce.toLowerCase()).toBe(nonce);
      expect([request.split("\r\n")[0], answer.status, html]).toEqual([
        request.split("\r\n")[0],
        status,
        errorPage("invalid_request", bodyNonce, lang, submitted),
      ]);
      for (const field of [
        "content-type: text/html; charset=utf-8",
        `content-security-policy: default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
        "x-content-type-options: nosniff",
        "x-frame-options: deny",
        "referrer-policy: same-origin",
        "cache-control: no-store",
        "connection: close",
        `content-length: ${Buffer.byteLength(html)}`,
      ]) {
        expect(`${answer.headers}\r\n`).toContain(`\r\n${field}\r\n`);
      }
      expect(answer.headers).not.toContain("api-version");
    }
  });

  // Regression: the log route's answer to a request it cannot read carried no CORS headers, so
  // the banner's fetch met a network error instead of the 400 or 431.
  it("400, 431 and 408 at the log route with its CORS headers, the Origin echoed where it was read before the failure", async () => {
    const log = "POST /api/consent/log HTTP/1.1\r\nHost: x\r\n";
    const big = `X-Big: ${"a".repeat(20_000)}\r\n`;
    const bad = "Bad Header Line\r\n";
    const origin = "https://shop.example";
    const body = "Content-Type: text/plain\r\nContent-Length: 100\r\n\r\n{";
    const cases: [string, number, string | undefined][] = [
      [`${log}Origin: ${origin}\r\n${big}\r\n`, 431, origin],
      [`${log}Origin: ${origin}\r\n${bad}\r\n`, 400, origin],
      [`${log}Origin: ${origin}\r\n${body}`, 408, origin],
      // Read as the route reads it: never `null`, nor two origins, nor a field after the failure.
      [`${log}Origin: null\r\n${bad}\r\n`, 400, undefined],
      [`${log}Origin: ${origin}\r\nOrigin: https://other.example\r\n${bad}\r\n`, 400, undefined],
      [`${log}${bad}Origin: ${origin}\r\n\r\n`, 400, undefined],
    ];
    for (const [request, status, allowed] of cases) {
      const answer = await rawExchange(port, (write) => write(request));
      const allowOrigin = /\r\naccess-control-allow-origin: ([^\r]*)/.exec(answer.headers)?.[1];
      const named = request.split("\r\n").slice(2, 4).join(" | ");
      expect([named, answer.status, allowOrigin]).toEqual([named, status, allowed]);
      expect(answer.headers).toContain("\r\nvary: origin\r\n");
      expect(answer.headers).toContain("connection: close");
      expect(JSON.parse(answer.body)).toMatchObject({ success: false, code: "invalid_request" });
    }
  });

  it("answers a request it cannot read pipelined behind another in the envelope, not in the shape of the one before", async () => {
    // The loader's read is still to begin when the log post behind it is refused: its answer
    // has not begun, so the 400 goes out, and not in the loader's `{ error, code }`.
    const answer = await rawExchange(port, (write) =>
      write(
        "GET /loader/0b7c2f7e-2d0a-4c55-9d8e-5b1f0c3a9e11.js HTTP/1.1\r\nHost: x\r\n\r\nPOST /api/consent/log HTTP/1.1\r\nBad Header Line\r\n\r\n",
      ),
    );
    expect([answer.status, JSON.parse(answer.body)]).toEqual([
      400,
      { data: { error: "The request could not be read", code: "invalid_request" }, version: "v1" },
    ]);
  });

  it("405 with Allow for a method outside Fastify's own set (WebDAV)", async () => {
    const answer = await rawExchange(port, (write) =>
      write("PROPFIND /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    );
    expect(answer.status).toBe(405);
    expect(answer.headers).toContain("allow: get, head");
    expect(JSON.parse(answer.body)).toMatchObject({
      data: { code: "method_not_allowed" },
      version: "v1",
    });
  });

  it("413 for a body over the limit, answered after the upload so the client never sees a reset", async () => {
    // The client reads nothing until its whole body is written, as a busy uploader does: an
    // answer sent and a connection closed before the body was read would be lost to a reset.
    const upload = (path: string, size: number) =>
      new Promise<{ received: string; error?: string }>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        let received = "";
        let error: string | undefined;
        socket.pause();
        socket.setEncoding("latin1").on("data", (chunk: string) => {
          received += chunk;
        });
        socket.on("error", (failure: NodeJS.ErrnoException) => {
          error = failure.code;
        });
        socket.on("close", () => resolve({ received, error }));
        socket.on("connect", () => {
          socket.write(
            `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${size}\r\n\r\n`,
          );
          socket.write(Buffer.alloc(size, 0x78), () => setTimeout(() => socket.resume(), 200));
        });
      });
    for (const path of ["/api/consent/log", "/api/v1/banners"]) {
      const { received, error } = await upload(path, 4 * 1024 * 1024);
      expect(error).toBeUndefined();
      expect(received).toMatch(/^HTTP\/1\.1 413 /);
      expect(received).toContain("connection: close");
      expect(received).toContain('"code":"invalid_request"');
    }
  });

  it("413 at once for a declared length too long to read past, without waiting for the body", async () => {
    // Waiting for the body would end in this server's 1 s request timeout: a 408, not the 413.
    const answer = await rawExchange(port, (write) =>
      write(
        `POST /api/consent/log HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n`,
      ),
    );
    expect([answer.status, answer.headers]).toEqual([
      413,
      expect.stringContaining("connection: close"),
    ]);
  });

  it("413 without 100 Continue for a body declared over the limit, so the client never sends it", async () => {
    const expecting = (length: number, authorization = "") =>
      `POST /api/v1/banners HTTP/1.1\r\nHost: x\r\n${authorization}Content-Type: application/json\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    // Over the 1 MiB limit: refused at once, and nothing asked of the client. The gateway's cap
    // comes before anything else, a missing credential included, as it does without Expect.
    const refused = await rawExchange(port, (write) => write(expecting(2_000_000)));
    expect(refused.status).toBe(413);
    expect(JSON.parse(refused.body)).toMatchObject({ data: { code: "invalid_request" } });
    // Within it, with a key of valid form: the client is told to go on.
    const { socket, received } = await rawConnection(port);
    socket.write(expecting(100, `Authorization: Bearer ${generateApiKey("live")}\r\n`));
    await vi.waitFor(() => expect(received()).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\n/));
    socket.destroy();
  });
});

/** Rules of the message itself, which every route family answers in its own shape. */
describe("the gateway's rules for every request, before its route runs", () => {
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let port: number;
  beforeAll(async () => {
    // A request that passes the rules is answered 503 for the daemon's absence.
    ({ app, port } = await listeningGateway({}));
  });
  afterAll(() => app.close());

  const exchange = (request: string) => rawExchange(port, (write) => write(request));
  const dateOf = (headers: string) => Date.parse(/\r\ndate: ([^\r]+)/.exec(headers)?.[1] ?? "");

  it("417 for an expectation other than 100-continue, in each route family's shape, and the connection closed", async () => {
    const expecting = (path: string) =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\nOrigin: https://shop.example\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: something-else\r\n\r\n`;
    const message = "The only expectation accepted is 100-continue";
    const v1 = await exchange(expecting("/api/v1/banners"));
    expect(v1.status).toBe(417);
    expect(v1.headers).toContain("connection: close");
    expect(v1.headers).toContain("api-version: v1");
    expect(v1.headers).toContain("api-supported-versions: v1");
    expect(v1.headers).toContain("cache-control: no-store");
    expect(Math.abs(dateOf(v1.headers) - Date.now())).toBeLessThan(5_000);
    expect(JSON.parse(v1.body)).toEqual({
      data: { error: message, code: "invalid_request" },
      version: "v1",
    });
    // The log route's shape (decisions §5), readable by the page that posted (CORS).
    const log = await exchange(expecting("/api/consent/log"));
    expect([log.status, JSON.parse(log.body)]).toEqual([
      417,
      { success: false, error: message, code: "invalid_request" },
    ]);
    expect(log.headers).toContain("access-control-allow-origin: https://shop.example");
    expect(log.headers).toContain("vary: origin");
    expect(log.headers).toContain("connection: close");
  });

  it("400 invalid_request for a transfer coding other than chunked, in each route family's shape", async () => {
    const coded = (path: string, codings: string) =>
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ${codings}\r\n\r\n2\r\n{}\r\n0\r\n\r\n`;
    const message = "The only transfer coding accepted is chunked";
    // Node frames a body by its final chunked and would hand over the gzip bytes undecoded.
    const v1 = await exchange(coded("/api/v1/banners", "gzip, chunked"));
    expect([v1.status, JSON.parse(v1.body)]).toEqual([
      400,
      { data: { error: message, code: "invalid_request" }, version: "v1" },
    ]);
    expect(v1.headers).toContain("connection: close");
    const log = await exchange(coded("/api/consent/log", "identity, chunked"));
    expect([log.status, JSON.parse(log.body)]).toEqual([
      400,
      { success: false, error: message, code: "invalid_request" },
    ]);
    // chunked alone, in any case, reaches the route (here: the daemon's absence).
    const chunked = await exchange(
      coded("/api/v1/banners", "Chunked").replace("Host: x", "Host: x\r\nConnection: close"),
    );
    expect([chunked.status, JSON.parse(chunked.body).data.code]).toEqual([503, "unavailable"]);
  });

  it("400 invalid_request for a Host that names no host, in each route family's shape (RFC 9112 3.2)", async () => {
    const message = "The request's Host header names no valid host";
    const hosted = (host: string, path = "/api/v1/health") =>
      exchange(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    for (const host of ["a b", "x/y", "user@shop.example", "[::1", "x:abc", "x?", "x#"]) {
      const answer = await hosted(host);
      expect([host, answer.status, JSON.parse(answer.body)]).toEqual([
        host,
        400,
        { data: { error: message, code: "invalid_request" }, version: "v1" },
      ]);
      expect(answer.headers).toContain("connection: close");
    }
    const loader = await hosted("x/y", "/loader/x.js");
    expect([loader.status, JSON.parse(loader.body)]).toEqual([
      400,
      { error: message, code: "invalid_request" },
    ]);
    // Every form RFC 3986 allows reaches the route (health: the daemon is unavailable).
    for (const host of [
      "",
      "shop.example.",
      "127.0.0.1:8080",
      "[::1]:80",
      "[v1.x]",
      "x,y",
      "%41",
      "x:",
    ]) {
      const answer = await hosted(host);
      expect([host, answer.status, JSON.parse(answer.body).data]).toEqual([
        host,
        503,
        { status: "unavailable" },
      ]);
    }
  });

  it("400 invalid_request for an HTTP/1.0 request with Transfer-Encoding, and the connection closed", async () => {
    // RFC 9112 6.1: faulty framing, even for `chunked`, which Node would read and keep going.
    const message = "An HTTP/1.0 request cannot carry Transfer-Encoding";
    const chunked = (path: string) =>
      `POST ${path} HTTP/1.0\r\nConnection: keep-alive\r\nOrigin: https://shop.example\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`;
    const next = "GET /api/v1/health HTTP/1.0\r\n\r\n";
    const v1 = await exchange(chunked("/api/v1/banners") + next);
    expect([v1.status, JSON.parse(v1.body)]).toEqual([
      400,
      { data: { error: message, code: "invalid_request" }, version: "v1" },
    ]);
    expect(v1.headers).toContain("connection: close");
    expect(v1.headers).toContain("api-version: v1");
    const log = await exchange(chunked("/api/consent/log") + next);
    expect([log.status, JSON.parse(log.body)]).toEqual([
      400,
      { success: false, error: message, code: "invalid_request" },
    ]);
    expect(log.headers).toContain("access-control-allow-origin: https://shop.example");
    // Its body framed by Content-Length instead, an HTTP/1.0 request reaches the route.
    const framed = await exchange(
      "POST /api/v1/banners HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    );
    expect([framed.status, JSON.parse(framed.body).data.code]).toEqual([503, "unavailable"]);
  });

  it("400 invalid_request in the route's shape for an HTTP/1.1 request without Host, not Node's bare 400", async () => {
    const missing = await exchange("GET /api/v1/health HTTP/1.1\r\nConnection: close\r\n\r\n");
    expect([missing.status, JSON.parse(missing.body)]).toEqual([
      400,
      { data: { error: "The request has no Host header", code: "invalid_request" }, version: "v1" },
    ]);
    // HTTP/1.0 has no Host to require: served (health says the daemon is unavailable).
    const older = await exchange("GET /api/v1/health HTTP/1.0\r\n\r\n");
    expect([older.status, JSON.parse(older.body).data]).toEqual([503, { status: "unavailable" }]);
  });

  it("closes the connection after each refusal of these rules: nothing sent after such a message is read", async () => {
    // Answered 503 (the daemon's absence) if it were read.
    const next = "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n";
    const body = "Content-Type: application/json\r\nContent-Length: 2\r\n";
    for (const [request, status, path] of [
      ["GET /api/v1/health HTTP/1.1\r\n\r\n", 400, "/api/v1/health"],
      ["GET /api/v1/health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "/api/v1/health"],
      [`POST /api/consent/log HTTP/1.1\r\nHost: x\r\nHost: x\r\n${body}\r\n{}`, 400, "log"],
      ["GET /nope HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "/nope"],
      [
        "GET /api/v1/banners HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n",
        400,
        "/api/v1/banners",
      ],
      [
        "POST /api/v1/banners HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        400,
        "/api/v1/banners",
      ],
      [
        "POST /api/v1/banners HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
        "/api/v1/banners",
      ],
      [
        `POST /api/v1/banners HTTP/1.1\r\nHost: x\r\n${body}Expect: something-else\r\n\r\n{}`,
        417,
        "/api/v1/banners",
      ],
    ] as const) {
      const { socket, received } = await rawConnection(port);
      const closed = new Promise((resolve) => socket.once("close", () => resolve("closed")));
      socket.write(request + next);
      const waited = new Promise((resolve) => setTimeout(() => resolve("open"), 2_000));
      expect([path, status, await Promise.race([closed, waited])]).toEqual([
        path,
        status,
        "closed",
      ]);
      // One answer, the refusal, saying that the connection closes.
      const answers = received().match(/^HTTP\/1\.1 \d{3}/gm) ?? [];
      expect([path, answers]).toEqual([path, [`HTTP/1.1 ${status}`]]);
      expect(received().toLowerCase()).toContain("connection: close");
      socket.destroy();
    }
  });

  it("HEAD gets the header fields GET does, Content-Length included, where nothing serves the path", async () => {
    for (const path of ["/nope", "/api/v1/nope", "/api/v1/%zz", "/api/consent/log"]) {
      const request = (method: string) =>
        exchange(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      const [get, head] = await Promise.all([request("GET"), request("HEAD")]);
      const lengthOf = (headers: string) => /\r\ncontent-length: (\d+)/.exec(headers)?.[1];
      expect([path, head.status, lengthOf(head.headers)]).toEqual([
        path,
        get.status,
        String(Buffer.byteLength(get.body)),
      ]);
      expect(head.body).toBe("");
    }
  });

  it("100 Continue only once a route reads the body: a request answered before is never asked for it", async () => {
    const expecting = (method: string, path: string, type = "application/json") =>
      `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n`;
    for (const [request, status] of [
      [expecting("POST", "/api/v1/nope"), 404],
      [expecting("PUT", "/api/v1/health"), 405],
      [expecting("POST", "/api/consent/log", "image/png"), 400],
    ] as const) {
      // Answered at once, and the connection closed: the body it announced never comes.
      const answer = await exchange(request);
      expect([request, answer.status]).toEqual([request, status]);
      expect(answer.headers).toContain("connection: close");
    }
  });
});

/** Bodies are read whole before the daemon checks a credential: what they hold at once is bounded. */
describe("the gateway's budget for request bodies in flight", () => {
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let url: string;
  beforeAll(async () => {
    // A request the budget lets through is answered 503 by the daemon's absence.
    const gateway = await listeningGateway({ bodyBudgetBytes: 64 * 1024 });
    app = gateway.app;
    url = `http://127.0.0.1:${gateway.port}`;
  });
  afterAll(() => app.close());

  const send = async (path: string) => {
    const response = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer ck_live_x" },
      body: JSON.stringify({ padding: "x".repeat(10_000) }),
    });
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      body: await response.json(),
    };
  };

  /** A raw connection to the gateway that has sent `text` and then `body` bytes of "x". */
  const rawRequest = async (text: string, body = 0) => {
    const socket = connect(Number(new URL(url).port), "127.0.0.1");
    socket.on("error", () => {});
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(text);
    if (body > 0) socket.write("x".repeat(body));
    return socket;
  };

  /**
   * A 10 KB body let through the budget: answered 503 by the daemon's absence, in the sentence of
   * an unreachable daemon, not the budget's.
   */
  const expectReachesDaemon = async () => {
    const passed = await send("/api/v1/consent/subjects/resolve");
    expect([passed.status, passed.retryAfter, passed.body.data.error]).toEqual([
      503,
      "1",
      "The service is temporarily unavailable; retry later",
    ]);
  };

  it("answers 503 with Retry-After while other bodies hold the budget, in each route's shape, and serves again once they are gone", async () => {
    // A client that announced 100 KB and has sent 60 KB of it, then waits.
    const hog = await rawRequest(
      "PUT /api/v1/consent/subjects/state HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
      60 * 1024,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));

    const busy = "The service is receiving too much at once; retry shortly";
    expect(await send("/api/v1/consent/subjects/resolve")).toEqual({
      status: 503,
      retryAfter: "1",
      body: { data: { error: busy, code: "unavailable" }, version: "v1" },
    });
    expect(await send("/api/consent/log")).toMatchObject({
      status: 503,
      retryAfter: "1",
      body: { success: false, error: busy, code: "unavailable" },
    });

    hog.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Within the budget again: the request reaches the daemon (here, one that cannot be reached).
    await expectReachesDaemon();
  });

  it("survives uploads cut off part-way, over its 1 MiB cap or within it, and holds nothing of them", async () => {
    for (let round = 0; round < 3; round++) {
      const over = await rawRequest(
        "POST /api/v1/banners HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n",
        30_000,
      );
      const within = await rawRequest(
        "POST /api/consent/log HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 50000\r\n\r\n",
        30_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      for (const socket of [over, within]) socket.resetAndDestroy();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // Still up, and nothing of theirs is held: a 10 KB body passes the 64 KB budget.
    await expectReachesDaemon();
  });
});

describe("the gateway's budget and requests pipelined behind one still waiting", () => {
  let daemon: http2.Http2Server;
  const sessions: http2.ServerHttp2Session[] = [];
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let port: number;
  beforeAll(async () => {
    // A daemon that never answers ListBanners and answers every other call at once.
    daemon = http2.createServer();
    daemon.on("session", (session) => sessions.push(session));
    daemon.on("stream", (stream, headers) => {
      stream.on("error", () => {});
      stream.resume();
      if (String(headers[":path"]).endsWith("/ListBanners")) return;
      stream.on("end", () => {
        stream.respond({ ":status": 200, "content-type": "application/proto" });
        stream.end();
      });
    });
    await new Promise<void>((resolve) => daemon.listen(0, "127.0.0.1", resolve));
    const daemonPort = (daemon.address() as { port: number }).port;
    ({ app, port } = await listeningGateway({
      transport: createDaemonTransport({ baseUrl: `http://127.0.0.1:${daemonPort}` }),
      bodyBudgetBytes: 64 * 1024,
    }));
  });
  afterAll(async () => {
    await app.close();
    // The held call keeps the gateway's connection open: the daemon ends it.
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => daemon.close(resolve));
  });

  it("answers a request it cannot read behind one still waiting on the daemon: 400, and the connection closed", async () => {
    // No answer has begun on the connection: the 400 goes out at once, the list is dropped.
    const answer = await rawExchange(port, (write) =>
      write(`${LIST_REQUEST}NOT A REQUEST\r\n\r\n`),
    );
    expect([answer.status, JSON.parse(answer.body)]).toEqual([
      400,
      { data: { error: "The request could not be read", code: "invalid_request" }, version: "v1" },
    ]);
    expect(answer.headers).toContain("connection: close");
  });

  it("reads no request pipelined behind one still waiting: it holds nothing of the budget", async () => {
    const resolve = (size: number) =>
      fetch(`http://127.0.0.1:${port}/api/v1/consent/subjects/resolve`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer ck_live_x" },
        body: JSON.stringify({ padding: "x".repeat(size) }),
      }).then((response) => response.status);
    // A list still waiting on the daemon, and a 40 KB PUT pipelined behind it: the PUT waits
    // its turn unread, so the budget holds nothing of it.
    const { socket, received } = await rawConnection(port);
    socket.write(
      LIST_REQUEST +
        "PUT /api/v1/consent/subjects/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ck_live_x\r\nContent-Type: application/json\r\nContent-Length: 40000\r\n\r\n",
    );
    socket.write("x".repeat(40_000));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // 30 KB and 30 KB fit the 64 KB budget: the pipelined 40 KB holds none of it.
    expect(await Promise.all([resolve(30_000), resolve(30_000)])).toEqual([200, 200]);
    expect(received()).toBe("");
    socket.resetAndDestroy();
  });
});

describe("requests a client pipelines on one connection without reading the answers", () => {
  let daemon: http2.Http2Server;
  const sessions: http2.ServerHttp2Session[] = [];
  let lists = 0;
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let port: number;
  beforeAll(async () => {
    // A daemon whose every banner list is 16 MB.
    const answer = toBinary(
      ListBannersResponseSchema,
      create(ListBannersResponseSchema, {
        banners: [create(BannerSchema, { id: "b", name: "x".repeat(16 * 1024 * 1024) })],
      }),
    );
    daemon = http2.createServer();
    daemon.on("session", (session) => sessions.push(session));
    daemon.on("stream", (stream) => {
      stream.on("error", () => {});
      stream.resume();
      stream.on("end", () => {
        lists += 1;
        stream.respond({ ":status": 200, "content-type": "application/proto" });
        stream.end(answer);
      });
    });
    await new Promise<void>((resolve) => daemon.listen(0, "127.0.0.1", resolve));
    const daemonPort = (daemon.address() as { port: number }).port;
    ({ app, port } = await listeningGateway({
      transport: createDaemonTransport({ baseUrl: `http://127.0.0.1:${daemonPort}` }),
      requestTimeoutMs: 500,
    }));
  });
  afterAll(async () => {
    await app.close();
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => daemon.close(resolve));
  });

  it("serves them one after another, each once the answer before it has gone, and closes a connection on which nothing moves", async () => {
    // Eight lists in one write, on a connection that reads nothing: were they all served, the
    // gateway would hold 128 MB of answers for this one client (300 of 3 MB took a process past
    // its heap).
    const { socket, received } = await rawConnection(port);
    socket.pause();
    socket.write(LIST_REQUEST.repeat(8));
    const closed = new Promise((resolve) => socket.once("close", resolve));
    await new Promise((resolve) => setTimeout(resolve, 700));
    // The first answer does not fit what the connection's buffers take: the others wait.
    expect(lists).toBe(1);
    // Nothing moves on it for connectionTimeout (twice the request timeout, here 1 s; Node
    // judges it twice): the gateway closes it. Read now, it ends before the first answer does.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    socket.resume();
    await closed;
    expect(received().length).toBeLessThan(16 * 1024 * 1024);
    expect(lists).toBe(1);
    // A client that reads gets every answer.
    lists = 0;
    const reader = await rawConnection(port);
    reader.socket.write(LIST_REQUEST.repeat(3));
    await vi.waitFor(() => expect(reader.received().length).toBeGreaterThan(3 * 16 * 1024 * 1024), {
      timeout: 10_000,
      interval: 50,
    });
    expect(lists).toBe(3);
    reader.socket.destroy();
  });

  /**
   * A connection whose 16 MB list answer has begun, on which the client stops reading (so the
   * answer is still going out) and sends a request that cannot be read.
   */
  async function unreadableBehindAnswer() {
    const connection = await rawConnection(port);
    connection.socket.write(LIST_REQUEST);
    // The first bytes of a 16 MB answer: well past waitFor's 1 s default on a busy machine.
    await vi.waitFor(() => expect(connection.received()).toMatch(/^HTTP\/1\.1 200 /), {
      timeout: 10_000,
      interval: 5,
    });
    connection.socket.pause();
    connection.socket.write("NOT A REQUEST\r\n\r\n");
    return connection;
  }

  it("writes nothing into an answer going out when the next request cannot be read: the answer is finished, then the connection closed", async () => {
    const { socket, received } = await unreadableBehindAnswer();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.resume();
    await closed;
    const text = received();
    const headEnd = text.indexOf("\r\n\r\n") + 4;
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(text.slice(0, headEnd))?.[1]);
    // The whole answer, and nothing after it.
    expect(text.length - headEnd).toBe(length);
  });

  it("still closes a connection whose answer does not move when the client keeps sending bytes after one it cannot read", async () => {
    const { socket, received } = await unreadableBehindAnswer();
    const closed = new Promise((resolve) => socket.once("close", resolve));
    // A byte every 300 ms for 4 s, reading nothing: were the bytes read, each would count as the
    // connection moving, and the 16 MB answer would be held as long as the bytes come.
    for (let i = 0; i < 13; i += 1) {
      socket.write("x");
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    socket.resume();
    await closed;
    expect(received().length).toBeLessThan(16 * 1024 * 1024);
  });
});

// Regression: only the loader's own 404 and its failure to read a banner carried no-store; a
// refusal on the way to it did not, and a CDN that keeps a 4xx or 5xx without Cache-Control a
// while would hand one visitor's malformed request (a duplicated Host) to every visitor.
describe("the answers at a loader's address other than the loader", () => {
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let port: number;
  beforeAll(async () => {
    // No daemon behind it: a loader read is answered 503 by its absence.
    ({ app, port } = await listeningGateway({}));
  });
  afterAll(() => app.close());

  const loader = "/loader/0b7c2f7e-2d0a-4c55-9d8e-5b1f0c3a9e11.js";
  const request = (head: string, body = "") =>
    rawExchange(port, (write) => write(`${head}\r\nConnection: close\r\n\r\n${body}`));

  it("are each kept by no cache (Cache-Control: no-store), whoever refused the request", async () => {
    const answers: [string, Promise<{ status: number; headers: string }>][] = [
      ["the daemon out of reach", request(`GET ${loader} HTTP/1.1\r\nHost: x`)],
      ["a public id no banner has", request("GET /loader/nope.js HTTP/1.1\r\nHost: x")],
      ["another method", request(`POST ${loader} HTTP/1.1\r\nHost: x\r\nContent-Length: 0`)],
      ["TRACE", request(`TRACE ${loader} HTTP/1.1\r\nHost: x`)],
      ["two Host headers", request(`GET ${loader} HTTP/1.1\r\nHost: x\r\nHost: y`)],
      ["an expectation", request(`GET ${loader} HTTP/1.1\r\nHost: x\r\nExpect: something-else`)],
      [
        "headers too large",
        request(`GET ${loader} HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}`),
      ],
      ["an unreadable header", request(`GET ${loader} HTTP/1.1\r\nHost: x\r\nBad Header Line`)],
    ];
    const seen = await Promise.all(
      answers.map(async ([what, answer]) => {
        const { status, headers } = await answer;
        return [what, status, /\r\ncache-control: ([^\r]*)/.exec(headers)?.[1]];
      }),
    );
    expect(seen).toEqual([
      ["the daemon out of reach", 503, "no-store"],
      ["a public id no banner has", 404, "no-store"],
      ["another method", 405, "no-store"],
      ["TRACE", 405, "no-store"],
      ["two Host headers", 400, "no-store"],
      ["an expectation", 417, "no-store"],
      ["headers too large", 431, "no-store"],
      ["an unreadable header", 400, "no-store"],
    ]);
  });
});
