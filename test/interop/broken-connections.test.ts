import http2 from "node:http2";
import net from "node:net";
import { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcFrame, openHealthCall } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const { NGHTTP2_FRAME_SIZE_ERROR, NGHTTP2_COMPRESSION_ERROR, NGHTTP2_NO_ERROR } = http2.constants;
const GOAWAY = 0x7;

/** One HTTP/2 frame: its 9-byte header (RFC 9113 §4.1), then its payload. */
function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.byteLength, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** A client's opening: the preface and an empty SETTINGS frame. */
const OPENING = Buffer.concat([PREFACE, frame(0x4, 0, 0, Buffer.alloc(0))]);

/** The error code of the first GOAWAY among the frames the server sent, if any. */
function goawayCode(received: Buffer): number | undefined {
  for (let at = 0; at + 9 <= received.byteLength; at += 9 + received.readUIntBE(at, 3)) {
    if (received[at + 3] === GOAWAY) return received.readUInt32BE(at + 9 + 4);
  }
  return undefined;
}

/**
 * A raw TCP client that sends `bytes` and waits, reading what comes, until the server closes the
 * connection or `waitMs` passes: when (ms after sending, or "still open"), and the GOAWAY's code.
 */
async function sendAndWait(url: string, bytes: Buffer[], waitMs: number) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  const received: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => received.push(chunk));
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("connect", resolve));
  const sentAt = Date.now();
  for (const chunk of bytes) socket.write(chunk);
  const closedAfter = await new Promise<number | "still open">((resolve) => {
    const wait = setTimeout(() => resolve("still open"), waitMs);
    socket.once("close", () => {
      clearTimeout(wait);
      resolve(Date.now() - sentAt);
    });
  });
  socket.destroy();
  return { closedAfter, goaway: goawayCode(Buffer.concat(received)) };
}

/**
 * An HTTP/2 client whose bytes pass through a raw socket, so a broken frame can follow its own and
 * it can stop answering (`deafen`: nothing more reaches it, nothing more leaves it), with a health
 * watch open: resolves once the watch's first answer has come. `closed` resolves when the server
 * closes the connection (the time, Date.now()).
 */
async function watchingClient(url: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let deaf = false;
  const tap = new Duplex({
    read() {},
    write(chunk, _encoding, done) {
      if (deaf) done();
      else socket.write(chunk, done);
    },
  });
  socket.on("data", (chunk: Buffer) => deaf || tap.push(chunk));
  socket.on("error", () => {});
  const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now())));
  const session = http2.connect(url, { createConnection: () => tap });
  session.on("error", () => {});
  const watch = openHealthCall(session, "Watch");
  watch.end(grpcFrame());
  await new Promise((resolve) => watch.once("data", resolve));
  const deafen = () => {
    deaf = true;
  };
  return { socket, closed, session, watch, deafen };
}

/** When `closed` resolved, ms after `from`, or "still open" if it has not within `waitMs`. */
async function closedWithin(closed: Promise<number>, from: number, waitMs: number) {
  const closedAt = await Promise.race([
    closed,
    new Promise<undefined>((resolve) => setTimeout(resolve, waitMs)),
  ]);
  return closedAt === undefined ? "still open" : closedAt - from;
}

/**
 * RFC 9113 §5.4.1: a server that sends GOAWAY for a connection error closes the connection. The
 * daemon looks for connections that stopped every `probeMs` (SESSION_PROBE_MS): one is closed
 * within three looks, here well under `boundMs`.
 */
describe("a connection to the daemon's port that breaks HTTP/2 or says nothing", () => {
  let service: TestService;
  const probeMs = 100;
  const boundMs = 2_000;
  beforeAll(async () => {
    service = await startTestService({ sessionProbeMs: probeMs });
  });
  afterAll(() => service.close());

  it.each([
    [
      "a frame longer than SETTINGS_MAX_FRAME_SIZE",
      frame(0x0, 0, 1, Buffer.alloc(20_000)),
      NGHTTP2_FRAME_SIZE_ERROR,
    ],
    // Read as a frame header: a length of 0x505249 bytes.
    ["a second preface after a valid one", PREFACE, NGHTTP2_FRAME_SIZE_ERROR],
    [
      "a header block that does not decode",
      frame(0x1, 0x5, 1, Buffer.from([0xff, 0xff, 0xff, 0xff])),
      NGHTTP2_COMPRESSION_ERROR,
    ],
  ])("is sent GOAWAY and closed after %s", async (_, broken, code) => {
    const reply = await sendAndWait(service.daemonUrl, [OPENING, broken], boundMs);
    expect(reply.goaway).toBe(code);
    expect(reply.closedAfter).not.toBe("still open");
  });

  it.each([
    ["sends nothing", []],
    ["sends the preface and nothing more", [OPENING]],
  ])("is closed when the client %s, answering no PING", async (_, bytes) => {
    const reply = await sendAndWait(service.daemonUrl, bytes, boundMs);
    expect(reply.closedAfter).not.toBe("still open");
    expect(reply.closedAfter).toBeGreaterThanOrEqual(probeMs);
  });

  it("is closed with the call still open on it when it broke during a health watch", async () => {
    const { socket, closed, session } = await watchingClient(service.daemonUrl);
    const brokenAt = Date.now();
    socket.write(frame(0x0, 0, 1, Buffer.alloc(20_000)));
    const closedAfter = await closedWithin(closed, brokenAt, boundMs);
    session.destroy();
    socket.destroy();
    expect(closedAfter).toBeLessThan(boundMs);
  });

  it("stays open while the client answers PINGs, and serves a call after many quiet looks", async () => {
    const session = http2.connect(service.daemonUrl);
    try {
      let closed = false;
      session.on("close", () => {
        closed = true;
      });
      await new Promise((resolve) => setTimeout(resolve, probeMs * 10));
      expect(closed).toBe(false);
      const stream = session.request({
        ":method": "POST",
        ":path": "/grpc.health.v1.Health/Check",
        "content-type": "application/grpc",
        te: "trailers",
      });
      stream.end(grpcFrame());
      stream.resume();
      const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve) =>
        stream.once("trailers", resolve),
      );
      expect(trailers["grpc-status"]).toBe("0");
    } finally {
      session.close();
    }
  });
});

describe("an idle connection to the daemon's port", () => {
  let service: TestService;
  const idleMs = 500;
  beforeAll(async () => {
    service = await startTestService({ sessionProbeMs: 100, idleSessionMs: idleMs });
  });
  afterAll(() => service.close());

  it("is sent GOAWAY NO_ERROR and closed once idle for IDLE_SESSION_MS, though it answers PINGs", async () => {
    const session = http2.connect(service.daemonUrl);
    const openedAt = Date.now();
    let goaway: number | undefined;
    session.once("goaway", (code: number) => {
      goaway = code;
    });
    const closedAfter = await new Promise<number | "still open">((resolve) => {
      const wait = setTimeout(() => resolve("still open"), idleMs * 4);
      session.once("close", () => {
        clearTimeout(wait);
        resolve(Date.now() - openedAt);
      });
    });
    session.destroy();
    expect(goaway).toBe(NGHTTP2_NO_ERROR);
    expect(closedAfter).toBeGreaterThanOrEqual(idleMs - 50);
  });

  // Regression: the idle bound sent a connection whose only call was a quiet health watch GOAWAY,
  // after which Node sends no PING on it, so a client that then vanished was kept for good.
  it("keeps a connection a quiet call is open on, and closes it with the call once the client stops answering", async () => {
    const { socket, closed, session, deafen } = await watchingClient(service.daemonUrl);
    let goaway: number | undefined;
    session.once("goaway", (code: number) => {
      goaway = code;
    });
    const openedAt = Date.now();
    const early = await closedWithin(closed, openedAt, idleMs * 3);
    deafen();
    const stoppedAt = Date.now();
    const closedAfter = await closedWithin(closed, stoppedAt, 2_000);
    session.destroy();
    socket.destroy();
    expect([early, goaway]).toEqual(["still open", undefined]);
    expect(closedAfter).toBeLessThan(2_000);
  });

  it("counts a connection's idle time from the end of its last call", async () => {
    const { socket, closed, session, watch } = await watchingClient(service.daemonUrl);
    await new Promise((resolve) => setTimeout(resolve, idleMs * 2));
    const endedAt = Date.now();
    watch.close(http2.constants.NGHTTP2_CANCEL);
    const closedAfter = await closedWithin(closed, endedAt, idleMs * 4);
    session.destroy();
    socket.destroy();
    expect(closedAfter).not.toBe("still open");
    expect(closedAfter).toBeGreaterThanOrEqual(idleMs - 50);
  });
});
