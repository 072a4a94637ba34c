import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { Agent, request } from "node:http";
import { connect, type Socket } from "node:net";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it, vi } from "vitest";
import { DEFAULT_DRAIN_TIMEOUT_MS } from "#daemon/config.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import {
  DAEMON_URL,
  endpoints,
  operatorTokenOf,
  PROGRAMS,
  type Program,
  STANDALONE_GATEWAY_URL,
  startProgram,
  startService,
  useProgramRoot,
} from "#test/support/processes.js";
import { rawConnection } from "#test/support/raw-http1.js";
import { rawServer } from "#test/support/raw-http2.js";

/** A response, or status 0 and the socket error when the connection was lost without one. */
interface Answer {
  status: number;
  text: string;
}

/**
 * A PUT whose headers and first half of the body are sent now and the rest on `finish()`: a
 * request the server has certainly accepted (`sent` waits for its 100 Continue) and not yet answered, on a keep-alive connection
 * as browsers and HTTP client libraries use.
 */
function slowPut(gatewayUrl: string, key: string, body: unknown, agent: Agent) {
  const bytes = Buffer.from(JSON.stringify(body));
  const half = Math.floor(bytes.length / 2);
  const req = request(`${gatewayUrl}/api/v1/consent/subjects/state`, {
    method: "PUT",
    agent,
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      "content-length": bytes.length,
      // The server's 100 Continue says it has read the headers: the request is certainly its.
      expect: "100-continue",
    },
  });
  const answer = new Promise<Answer>((resolve) => {
    const lost = (error: NodeJS.ErrnoException) =>
      resolve({ status: 0, text: `connection lost: ${error.code ?? error.message}` });
    req.on("error", lost);
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("error", lost);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
  });
  const read = new Promise<void>((resolve) => req.once("continue", () => resolve()));
  const written = new Promise<void>((resolve) =>
    req.write(bytes.subarray(0, half), () => resolve()),
  );
  const sent = Promise.all([read, written]).then(() => undefined);
  return { sent, answer, finish: () => req.end(bytes.subarray(half)) };
}

/** The HTTP/1.1 answers in what came back on a connection, each body read by its Content-Length. */
function http1Answers(received: string) {
  const answers: { status: number; headers: Record<string, string>; body: string }[] = [];
  let rest = received;
  while (rest.length > 0) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) throw new Error(`an answer cut short: ${JSON.stringify(rest)}`);
    const [statusLine = "", ...lines] = rest.slice(0, end).split("\r\n");
    const headers = Object.fromEntries(
      lines.map((line) => {
        const colon = line.indexOf(":");
        return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()];
      }),
    );
    const length = Number(headers["content-length"] ?? 0);
    answers.push({
      status: Number(statusLine.split(" ")[1]),
      headers,
      body: rest.slice(end + 4, end + 4 + length),
    });
    rest = rest.slice(end + 4 + length);
  }
  return answers;
}

/** Resolves once nothing accepts connections on the URL's port any more (shutdown has begun). */
async function listenerClosed(url: string, timeoutMs = 5_000): Promise<void> {
  const { hostname, port } = new URL(url);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), hostname);
      socket.once("connect", () => {
        socket.destroy();
        resolve(false);
      });
      socket.once("error", () => resolve(true));
    });
    if (refused) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${url} still accepts connections ${timeoutMs} ms after SIGTERM`);
}

/** SIGTERM drains in-flight requests and exits cleanly; acknowledged writes last. */
describe("SIGTERM on npm start", () => {
  const dirs = useProgramRoot("consent-shutdown-");

  it("finishes in-flight requests, exits 0 within seconds, and every acknowledged write is there after a restart", async () => {
    const dataDir = dirs.join("data");
    const first = await startService(dataDir);
    const service = first.service;
    const { key } = await mintKey(service, await createTeam(service, "business"));
    const { publicId } = await createBanner(service, key);
    const write = (subjectId: string) => ({
      bannerId: publicId,
      subjectId,
      baseVersion: 0,
      consentState: consentState(),
    });
    const before = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: write("written-before-sigterm"),
    });
    expect(before.status).toBe(200);

    // One request certainly in flight (headers read, body incomplete), plus a burst racing the signal.
    const agent = new Agent({ keepAlive: true });
    const inFlight = slowPut(service.gatewayUrl, key, write("in-flight-at-sigterm"), agent);
    await inFlight.sent;
    expect((await http(service, "GET", "/api/v1/health")).status).toBe(200);
    const burst = Array.from({ length: 20 }, (_, i) => `burst-${i}`).map(async (subjectId) => {
      let response: Response;
      try {
        response = await fetch(`${service.gatewayUrl}/api/v1/consent/subjects/state`, {
          method: "PUT",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(write(subjectId)),
        });
      } catch {
        return { subjectId, outcome: "no response" as const };
      }
      const text = await response.text().catch(() => undefined);
      return { subjectId, outcome: text === undefined ? "truncated" : response.status, text };
    });

    await Promise.race(burst);
    const signalledAt = Date.now();
    // Drain means: finish what was accepted, refuse what was not, exit 0 within seconds.
    first.program.child.kill("SIGTERM");
    await listenerClosed(service.gatewayUrl);
    inFlight.finish();
    const answer = await inFlight.answer;
    agent.destroy();
    expect(answer).toEqual({ status: 200, text: expect.stringContaining('"success":true') });
    expect(JSON.parse(answer.text)).toMatchObject({ data: { version: 1 } });

    const outcomes = await Promise.all(burst);
    for (const { outcome, text } of outcomes) {
      expect(outcome === 200 || outcome === 503 || outcome === "no response").toBe(true);
      if (outcome === 200) expect(JSON.parse(text ?? "")).toMatchObject({ data: { version: 1 } });
    }
    expect(await first.program.exitWithin(5_000 - (Date.now() - signalledAt))).toBe(0);
    expect(first.program.stderr()).toBe("");

    const second = await startService(dataDir);
    const acknowledged = [
      "written-before-sigterm",
      "in-flight-at-sigterm",
      ...outcomes.filter((o) => o.outcome === 200).map((o) => o.subjectId),
    ];
    for (const subjectId of acknowledged) {
      const resolved = await http(second.service, "POST", "/api/v1/consent/subjects/resolve", {
        key,
        body: { bannerId: publicId, subjectId },
      });
      expect([subjectId, resolved.body.data]).toMatchObject([
        subjectId,
        { found: true, version: 1, consentState: consentState() },
      ]);
    }
    expect(await second.program.stop()).toBe(0);
  });
});

describe("SIGTERM on npm start while keep-alive clients stay busy", () => {
  const dirs = useProgramRoot("consent-shutdown-busy-");

  it("answers a request that arrives on a busy connection during the drain, and closes that connection", async () => {
    const { program, service } = await startService(dirs.join("data"));
    const { key } = await mintKey(service, await createTeam(service, "enterprise"));
    const { publicId } = await createBanner(service, key);
    const body = JSON.stringify({ bannerId: publicId, subjectId: "nobody" });
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    let stop = false;
    const answers: Answer[] = [];
    // Sixteen clients, each sending its next request on its kept-alive connection at once.
    const clients = Array.from({ length: 16 }, async () => {
      while (!stop) {
        const answer = await new Promise<(typeof answers)[number] | undefined>((resolve) => {
          const req = request(`${service.gatewayUrl}/api/v1/consent/subjects/resolve`, {
            method: "POST",
            agent,
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          });
          req.on("error", () => resolve(undefined));
          req.on("response", (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => {
              text += chunk;
            });
            res.on("error", () => resolve(undefined));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
          });
          req.end(body);
        });
        if (!answer) return; // the drain closed this connection
        answers.push(answer);
      }
    });
    while (answers.length < 200) await new Promise((resolve) => setTimeout(resolve, 10));
    // Whether one of those clients sends its next request before the drain's sweep closes its
    // idle connection depends on the machine's speed. This connection is certainly busy: its
    // request was read before the signal (100 Continue), and the next one, pipelined behind it
    // (RFC 9112 §9.3.2), arrives during the drain.
    const resolveRequest = (json: string, expect = "") =>
      `POST /api/v1/consent/subjects/resolve HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n${expect}\r\n`;
    const busy = await rawConnection(Number(new URL(service.gatewayUrl).port));
    const busyClosed = new Promise((resolve) => busy.socket.once("close", resolve));
    const half = Math.floor(body.length / 2);
    busy.socket.write(resolveRequest(body, "expect: 100-continue\r\n") + body.slice(0, half));
    while (!busy.received().startsWith("HTTP/1.1 100 Continue\r\n\r\n")) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    program.child.kill("SIGTERM");
    await listenerClosed(service.gatewayUrl);
    busy.socket.write(body.slice(half) + resolveRequest(body) + body);
    await busyClosed;
    await Promise.all(clients.map((client) => Promise.race([client, program.exited])));
    stop = true;
    agent.destroy();
    expect(await program.exitWithin(5_000)).toBe(0);
    // Every answer is the API's own: those during the drain too.
    for (const answer of answers) {
      expect([answer.status, JSON.parse(answer.text)]).toEqual([
        200,
        { data: { found: false }, version: "v1" },
      ]);
    }
    // Both requests of the busy connection answered, the one that came during the drain closing it.
    const [continued, first, second, ...more] = http1Answers(busy.received());
    expect([continued?.status, first?.status, second?.status, more]).toEqual([100, 200, 200, []]);
    expect([JSON.parse(first?.body ?? ""), JSON.parse(second?.body ?? "")]).toEqual([
      { data: { found: false }, version: "v1" },
      { data: { found: false }, version: "v1" },
    ]);
    expect(second?.headers.connection).toBe("close");
  });
});

/**
 * A raw TCP connection to the URL's port that sends `bytes` (nothing by default) and never closes
 * its side, not even once the server has closed its own: a client that hangs, a port scanner, a
 * browser's preconnect. Resolves once the server has accepted it: when the server writes first
 * (the daemon's HTTP/2 settings), on its first bytes; else (the REST port) after a moment.
 */
async function heldConnection(
  url: string,
  { bytes = "", serverSpeaksFirst = true } = {},
): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
  // A cut connection is what the drain may do to it; the test looks at the program's exit.
  socket.on("error", () => socket.destroy());
  await once(socket, "connect");
  if (bytes) socket.write(bytes);
  if (serverSpeaksFirst) await once(socket, "data");
  else await new Promise((resolve) => setTimeout(resolve, 300));
  return socket;
}

/** SIGTERM while `held` stays open: the program exits 0 within `withinMs`, saying nothing on stderr. */
async function expectCleanExit(program: Program, held: Socket, withinMs = 25_000) {
  program.child.kill("SIGTERM");
  expect(await program.exitWithin(withinMs)).toBe(0);
  held.destroy();
  expect(program.stderr()).toBe("");
}

/**
 * The drain limit the tests that wait out a drain set (CONSENT_DRAIN_TIMEOUT_MS), far below the
 * default so that a cut at the default would fail them.
 */
const SHORT_DRAIN_MS = 2_000;
/** What a program may take to exit after its drain's cut: closing the store, flushing its log. */
const AFTER_CUT_MS = 3_000;

/**
 * SIGTERM while `held`, a connection on which a request or call has begun and stalled, stays
 * open: the drain waits `limitMs` for it, then cuts it, and the program exits 0 no sooner than
 * `limitMs` after the signal and within AFTER_CUT_MS more, saying nothing on stderr, the server's
 * side of the connection ended.
 */
async function expectCutAtLimit(program: Program, held: Socket, limitMs: number) {
  held.resume();
  const signalledAt = Date.now();
  program.child.kill("SIGTERM");
  expect(await program.exitWithin(limitMs + AFTER_CUT_MS)).toBe(0);
  const exitedAfter = Date.now() - signalledAt;
  // Not before the limit (a timer may fire a millisecond early): the drain waited for the call.
  expect(exitedAfter).toBeGreaterThanOrEqual(limitMs - 5);
  await vi.waitFor(() => expect(held.readableEnded || held.destroyed).toBe(true));
  held.destroy();
  expect(program.stderr()).toBe("");
}

describe("SIGTERM with a connection held open on the REST port", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-shutdown-preconnect-");

  it("npm start closes a preconnect at once instead of waiting for the drain's deadline", async () => {
    const { program, service } = await startService(dirs.join("npm-start"));
    const silent = await heldConnection(service.gatewayUrl, { serverSpeaksFirst: false });
    // Well inside the default drain limit (8 s), which is what the connection cost before.
    await expectCleanExit(program, silent, DEFAULT_DRAIN_TIMEOUT_MS / 2);
  });

  const halfRequest = "GET /api/v1/health HTTP/1.1\r\nHost: x\r\n";

  it("npm start cuts a client that sent half a request at CONSENT_DRAIN_TIMEOUT_MS and exits 0", async () => {
    const { program, service } = await startService(dirs.join("half-request"), {
      CONSENT_DRAIN_TIMEOUT_MS: String(SHORT_DRAIN_MS),
    });
    const stalled = await heldConnection(service.gatewayUrl, {
      bytes: halfRequest,
      serverSpeaksFirst: false,
    });
    await expectCutAtLimit(program, stalled, SHORT_DRAIN_MS);
  });

  it("npm start with two workers cuts a client that sent half a request at CONSENT_DRAIN_TIMEOUT_MS and exits 0", async () => {
    const { program, service } = await startService(
      dirs.join("workers"),
      { CONSENT_WORKERS: "2", CONSENT_DRAIN_TIMEOUT_MS: String(SHORT_DRAIN_MS) },
      // As test/processes/workers.test.ts: two workers start slowly on a loaded machine.
      { startupMs: 40_000 },
    );
    const stalled = await heldConnection(service.gatewayUrl, {
      bytes: halfRequest,
      serverSpeaksFirst: false,
    });
    await expectCutAtLimit(program, stalled, SHORT_DRAIN_MS);
  });
});

/** A drain that waits for a client to close its connection could wait for ever. */
describe("SIGTERM with a connection held open on the daemon port", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-shutdown-held-");

  it("npm start exits 0 while a connection that never sent a byte stays open", async () => {
    const { program, service } = await startService(dirs.join("npm-start"));
    await expectCleanExit(program, await heldConnection(service.daemonUrl));
  });

  it("consentd exits 0 while a connection that never sent a byte stays open", async () => {
    const program = startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dirs.join("consentd") });
    await expectCleanExit(program, await heldConnection(await program.waitFor(DAEMON_URL)));
  });

  // Half the HTTP/2 connection preface: the daemon waits for the rest, which never comes.
  const halfPreface = { bytes: "PRI * HTTP/2.0\r\n" };

  it("consentd cuts a client that began HTTP/2 and then stalled at CONSENT_DRAIN_TIMEOUT_MS and exits 0", async () => {
    const program = startProgram(PROGRAMS.consentd, {
      CONSENT_DATA_DIR: dirs.join("stalled"),
      CONSENT_DRAIN_TIMEOUT_MS: String(SHORT_DRAIN_MS),
    });
    const stalled = await heldConnection(await program.waitFor(DAEMON_URL), halfPreface);
    await expectCutAtLimit(program, stalled, SHORT_DRAIN_MS);
  });

  // The default limit: docker stop sends SIGKILL 10 s after SIGTERM.
  it("consentd with the default drain limit cuts a stalled client at 8 s and exits 0 before docker stop's 10 s", async () => {
    const program = startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dirs.join("default") });
    const stalled = await heldConnection(await program.waitFor(DAEMON_URL), halfPreface);
    const signalledAt = Date.now();
    await expectCutAtLimit(program, stalled, DEFAULT_DRAIN_TIMEOUT_MS);
    expect(Date.now() - signalledAt).toBeLessThan(10_000);
  });
});

/** A call that never ends by itself: its handler is told to stop before the drain's cut. */
describe("SIGTERM on consentd with a log tail open", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-shutdown-tail-");

  it("ends the tail with unavailable at half of a short CONSENT_DRAIN_TIMEOUT_MS, before the cut, and exits 0", async () => {
    const dataDir = dirs.join("tail");
    const program = startProgram(PROGRAMS.consentd, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_DRAIN_TIMEOUT_MS: String(SHORT_DRAIN_MS),
    });
    const daemonUrl = await program.waitFor(DAEMON_URL);
    const operatorToken = await operatorTokenOf(dataDir);
    const service = endpoints({ gatewayUrl: "", daemonUrl, operatorToken });
    const teamId = await createTeam(service);
    const logs = createClient(ConsentLogService, createGrpcTransport({ baseUrl: daemonUrl }));
    const tail = logs.tailConsentLogs(
      {},
      { headers: { authorization: `Bearer ${operatorToken}`, "consent-team": teamId } },
    );
    const ended = (async () => {
      try {
        for await (const _ of tail);
        return { at: Date.now(), failure: "none" };
      } catch (error) {
        const { code, rawMessage } = ConnectError.from(error);
        return { at: Date.now(), failure: `${Code[code]}: ${rawMessage}` };
      }
    })();
    // The tail is open once the daemon has created its stream (it answers with headers at once).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const signalledAt = Date.now();
    program.child.kill("SIGTERM");
    const { at, failure } = await ended;
    const after = at - signalledAt;
    expect(failure).toBe("Unavailable: the daemon is shutting down");
    expect(after).toBeGreaterThanOrEqual(SHORT_DRAIN_MS / 2 - 5);
    expect(after).toBeLessThan(SHORT_DRAIN_MS);
    expect(
      await program.exitWithin(SHORT_DRAIN_MS + AFTER_CUT_MS - (Date.now() - signalledAt)),
    ).toBe(0);
    expect(program.stderr()).toBe("");
  });
});

/** A terminal that closes (an SSH session ending) sends SIGHUP: the same drain as SIGTERM. */
describe("SIGHUP", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-shutdown-hangup-");

  it("npm start answers the request in flight, then ends by the hang-up, as on SIGTERM", async () => {
    const { program, service } = await startService(dirs.join("npm-start"));
    const key = (await mintKey(service, await createTeam(service))).key;
    const { publicId } = await createBanner(service, key);
    const put = slowPut(
      service.gatewayUrl,
      key,
      { bannerId: publicId, subjectId: "hangup", baseVersion: 0, consentState: consentState() },
      new Agent({ keepAlive: true }),
    );
    await put.sent;
    program.child.kill("SIGHUP");
    await listenerClosed(service.gatewayUrl);
    put.finish();
    expect((await put.answer).status).toBe(200);
    // Ended by the signal (a shell's 129), as a hung-up program is: see endByHangUp.
    expect(await program.exitWithin(15_000)).toBeNull();
    expect(program.child.signalCode).toBe("SIGHUP");
    expect(program.stderr()).toBe("");
  });

  // The terminal itself goes away: each process gets SIGHUP, writing the terminal's settings back
  // on exit fails (Node 20 aborted there, nodejs/node#51519), and so does every line logged to it
  // (EIO). Each program runs with its log in a file, then with its log on the terminal (stderr
  // in a file, where an abort would say so).
  it.each([
    ["npm start with two workers", "file", PROGRAMS.consent, { CONSENT_WORKERS: "2" }],
    ["consentd", "file", PROGRAMS.consentd, {}],
    ["npm start with two workers", "terminal", PROGRAMS.consent, { CONSENT_WORKERS: "2" }],
    ["consentd", "terminal", PROGRAMS.consentd, {}],
  ])(
    "%s on a terminal that closes, its log in a %s, drains and ends without an abort",
    async (_, log, bin, env) => {
      const dataDir = dirs.join(`terminal-${bin.replace(/\W/g, "-")}-${log}`);
      const [out, err, pidFile] = [`${dataDir}.out`, `${dataDir}.err`, `${dataDir}.pid`];
      const redirect = log === "file" ? `> '${out}' 2>&1` : `2> '${err}'`;
      const command = `echo $$ > '${pidFile}'; exec '${process.execPath}' ${bin} ${redirect}`;
      const terminal = spawn("script", ["-qec", command, "/dev/null"], {
        cwd: process.cwd(),
        env: {
          ...process.env,
          CONSENT_DATA_DIR: dataDir,
          CONSENT_HTTP_PORT: "0",
          CONSENT_GRPC_PORT: "0",
          ...env,
        },
        stdio: ["ignore", "pipe", "ignore"],
      });
      let screen = "";
      terminal.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        screen += chunk;
      });
      const read = (file: string) => readFile(file, "utf8").catch(() => "");
      await vi.waitFor(
        async () => expect(log === "file" ? await read(out) : screen).toMatch(/Mint an API key/),
        { timeout: 30_000, interval: 100 },
      );
      const pid = Number(await read(pidFile));
      terminal.kill("SIGKILL"); // the terminal's other end closes: a hang-up
      const alive = () => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      await vi.waitFor(() => expect(alive()).toBe(false), { timeout: 20_000, interval: 100 });
      if (log === "file") expect(await read(out)).toContain('"msg":"draining and shutting down"');
      expect(await read(log === "file" ? out : err)).not.toMatch(
        /Assertion failed|Native stack trace|Error/,
      );
    },
  );
});

/** A stand-alone gateway's drain runs out while its daemon has stopped answering. */
describe("SIGTERM on a stand-alone gateway whose daemon stopped answering", {
  timeout: 60_000,
}, () => {
  it("answers the requests still waiting with 503 before its drain cuts them, and exits 0, a second SIGTERM or not", async () => {
    // A daemon that accepts calls and never answers them (a frozen process, a dead network).
    const silent = await rawServer(() => {});
    try {
      const program = startProgram(PROGRAMS.gateway, {
        CONSENT_DAEMON_URL: silent.url,
        CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
        CONSENT_DRAIN_TIMEOUT_MS: String(SHORT_DRAIN_MS),
      });
      const gatewayUrl = await program.waitFor(STANDALONE_GATEWAY_URL);
      const waiting = fetch(`${gatewayUrl}/api/v1/banners`, {
        headers: { authorization: "Bearer cs_live_0000000000000000000000000000000000000000" },
      });
      // The gateway's start-up check of its token (given up after 2 s), then the request.
      await expect.poll(() => silent.streams.length).toBe(2);
      const signalledAt = Date.now();
      program.child.kill("SIGTERM");
      // A second signal (`timeout` signals a child, then its process group) changes nothing.
      await new Promise((resolve) => setTimeout(resolve, 500));
      program.child.kill("SIGTERM");
      const response = await waiting;
      // Answered half a second before the cut, which comes at CONSENT_DRAIN_TIMEOUT_MS.
      expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(SHORT_DRAIN_MS - 500 - 5);
      expect(response.status).toBe(503);
      expect(await response.json()).toEqual({
        data: { error: "The service is temporarily unavailable; retry later", code: "unavailable" },
        version: "v1",
      });
      expect(
        await program.exitWithin(SHORT_DRAIN_MS + AFTER_CUT_MS - (Date.now() - signalledAt)),
      ).toBe(0);
    } finally {
      await silent.close();
    }
  });
});
