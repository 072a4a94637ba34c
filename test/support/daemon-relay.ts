import http2 from "node:http2";
import { pino } from "pino";
import { loadConfig } from "#daemon/config.js";
import { MAX_STREAMS_PER_CONNECTION } from "#daemon/server.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { startGateway } from "#gateway/main.js";
import { http } from "#test/support/api.js";
import { endpoints } from "#test/support/processes.js";
import type { TestService } from "#test/support/service.js";

/** How the relay answers a call in the daemon's place, once the call's request has come. */
export type AnswerInstead = (stream: http2.ServerHttp2Stream) => void;

/**
 * An h2c relay in front of a daemon's port for the gateway's Connect calls: each call goes on to
 * the daemon and its answer comes back as the daemon sent it, unless `instead(path)` gives an
 * answer to send in its place (a failure the daemon does not give on demand). Connect answers
 * carry no HTTP trailers, so none are relayed: gRPC calls go to the daemon itself. `settings` are
 * the relay's own HTTP/2 settings towards the gateway (the daemon's stream bound, to hold answers
 * as the daemon would hold them).
 */
export async function daemonRelay(
  daemonUrl: string,
  instead: (path: string) => AnswerInstead | undefined,
  settings?: http2.Settings,
) {
  const daemon = http2.connect(daemonUrl);
  daemon.on("error", () => {});
  const server = http2.createServer({ settings });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
    session.on("error", () => {});
  });
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    const answer = instead(String(headers[":path"]));
    if (answer) {
      stream.resume();
      stream.on("end", () => answer(stream));
      return;
    }
    const call = daemon.request(withoutPseudoHeaders(headers, [":method", ":path"]));
    call.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    call.on("response", (answered) => {
      stream.respond(withoutPseudoHeaders(answered, [":status"]));
      call.pipe(stream);
    });
    stream.pipe(call);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const session of sessions) session.destroy();
      daemon.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A relay (daemonRelay) in front of a daemon's port with the daemon's own stream bound, counting
 * the banner reads that reach it (`reads`); once `hold()` is called, their answers are held, as a
 * stalled store holds them, until the relay closes.
 */
export async function bannerReadRelay(daemonUrl: string) {
  let holding = false;
  let reads = 0;
  const relay = await daemonRelay(
    daemonUrl,
    (path) => {
      if (!path.endsWith("/GetPublishedBanner")) return undefined;
      reads++;
      return holding ? () => {} : undefined;
    },
    { maxConcurrentStreams: MAX_STREAMS_PER_CONNECTION },
  );
  return {
    url: relay.url,
    close: relay.close,
    /** Banner reads that reached the relay so far. */
    get reads() {
      return reads;
    },
    hold() {
      holding = true;
    },
  };
}

/** The headers a relayed request or answer keeps: `kept` of the pseudo-headers, and the rest. */
function withoutPseudoHeaders(
  headers: http2.IncomingHttpHeaders,
  kept: string[],
): http2.OutgoingHttpHeaders {
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !name.startsWith(":") || kept.includes(name)),
  );
}

/**
 * A stand-alone gateway on a free port calling `daemon` through the relay at `relayUrl`, with the
 * lines it logs at warning level and above, parsed.
 */
export async function gatewayThroughRelay(
  daemon: Pick<TestService, "daemonUrl" | "operatorToken">,
  relayUrl: string,
) {
  const logs: Record<string, unknown>[] = [];
  const gateway = await startGateway({
    config: loadConfig({ CONSENT_HTTP_PORT: "0" }),
    transport: createDaemonTransport({ baseUrl: relayUrl }),
    operatorToken: daemon.operatorToken,
    logger: pino({ level: "warn" }, { write: (line: string) => logs.push(JSON.parse(line)) }),
  });
  const service = endpoints({ ...daemon, gatewayUrl: gateway.url });
  return {
    service,
    logs,
    loader: (publicId: string) => http(service, "GET", `/loader/${publicId}.js`),
    close: () => gateway.close(),
  };
}
