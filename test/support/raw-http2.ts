import http2 from "node:http2";

/** An HTTP/2 server answering every request with `respond` (one that never answers: a hang). */
export async function rawServer(respond: (stream: http2.ServerHttp2Stream) => void) {
  const server = http2.createServer();
  const streams: http2.ServerHttp2Stream[] = [];
  const sessions: http2.ServerHttp2Session[] = [];
  server.on("session", (session) => sessions.push(session));
  server.on("stream", (stream) => {
    streams.push(stream);
    // A stream the stand-in closes with an error code reports it here; nothing to do.
    stream.on("error", () => {});
    stream.resume();
    stream.on("end", () => respond(stream));
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
