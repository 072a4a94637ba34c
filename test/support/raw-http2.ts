import http2 from "node:http2";

/**
 * An HTTP/2 server answering every request with `respond`, once its body has come (one that never
 * answers: a hang), given the request's headers.
 */
export async function rawServer(
  respond: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
) {
  const server = http2.createServer();
  const streams: http2.ServerHttp2Stream[] = [];
  const sessions: http2.ServerHttp2Session[] = [];
  server.on("session", (session) => sessions.push(session));
  server.on("stream", (stream, headers) => {
    streams.push(stream);
    // A stream the stand-in closes with an error code reports it here; nothing to do.
    stream.on("error", () => {});
    stream.resume();
    stream.on("end", () => respond(stream, headers));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    streams,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const session of sessions) session.destroy();
      }),
  };
}

export interface RawReply {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  trailers: http2.IncomingHttpHeaders;
}

/** One POST over its own HTTP/2 connection, answered as it came off the wire. */
export function rawRequest(
  url: string,
  path: string,
  headers: http2.OutgoingHttpHeaders,
  body: Uint8Array,
) {
  return new Promise<RawReply>((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": path, ...headers });
    const chunks: Buffer[] = [];
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    stream.on("response", (received) => {
      responseHeaders = received;
    });
    stream.on("trailers", (received) => {
      trailers = received;
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => {
      session.close();
      resolve({
        status: Number(responseHeaders[":status"]),
        headers: responseHeaders,
        body: Buffer.concat(chunks),
        trailers,
      });
    });
    stream.on("error", reject);
    stream.end(body);
  });
}

/**
 * A POST whose body is still being sent when the daemon answers it: the answer, and how the
 * stream ended (its RST_STREAM code), once the daemon has let go of it too (the session closes).
 */
export async function answeredEarly(url: string, headers: http2.OutgoingHttpHeaders, body: Buffer) {
  const session = http2.connect(url);
  const stream = session.request({ ":method": "POST", ...headers });
  let response: http2.IncomingHttpHeaders = {};
  let trailers: http2.IncomingHttpHeaders = {};
  const chunks: Buffer[] = [];
  stream.on("response", (received) => {
    response = received;
  });
  stream.on("trailers", (received) => {
    trailers = received;
  });
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  // The reset ends the upload: the client's write fails, the answer stands.
  stream.on("error", () => {});
  stream.end(body);
  await new Promise((resolve) => stream.once("close", resolve));
  await new Promise<void>((resolve) => session.close(() => resolve()));
  return { response, trailers, body: Buffer.concat(chunks), rstCode: stream.rstCode };
}

/**
 * A gRPC (and gRPC-Web) message frame: flags 0, the length as 32 bits big-endian, the message.
 * `announced`, when more than the message holds, is a frame whose rest never comes.
 */
export function grpcFrame(message: Uint8Array = new Uint8Array(0), announced = message.byteLength) {
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(announced, 1);
  return Buffer.concat([prefix, message]);
}

/** The trailers of a gRPC-Web body: its last frame (flag 0x80), HTTP/1 header lines. */
export function grpcWebTrailers(body: Buffer): Record<string, string> {
  let offset = 0;
  while (offset + 5 <= body.byteLength) {
    const length = body.readUInt32BE(offset + 1);
    if (body[offset] === 0x80) {
      const text = body.subarray(offset + 5, offset + 5 + length).toString("latin1");
      return Object.fromEntries(
        text
          .split("\r\n")
          .filter((line) => line.includes(":"))
          .map((line) => {
            const colon = line.indexOf(":");
            const value = line.slice(colon + 1).trim();
            const name = line.slice(0, colon).trim().toLowerCase();
            return [name, name === "grpc-message" ? decodeURIComponent(value) : value];
          }),
      );
    }
    offset += 5 + length;
  }
  return {};
}

/**
 * A gRPC call of grpc.health.v1.Health's `method` on `session`, its errors ignored, its request
 * left open: the daemon gets what the test writes to it, until the test ends or closes it.
 */
export function openHealthCall(
  session: http2.ClientHttp2Session,
  method: "Check" | "Watch",
): http2.ClientHttp2Stream {
  const call = session.request({
    ":method": "POST",
    ":path": `/grpc.health.v1.Health/${method}`,
    "content-type": "application/grpc",
    te: "trailers",
  });
  call.on("error", () => {});
  return call;
}
