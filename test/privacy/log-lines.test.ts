import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { createClient } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { afterAll, describe, expect, it } from "vitest";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { serviceLoggers } from "#daemon/logging.js";
import { buildGateway } from "#gateway/app.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { consentState, http, mintKey, operator } from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import { startService, stopAllPrograms } from "#test/support/processes.js";
import { subscribe } from "#test/support/webhook-subscriber.js";

const TOKEN = "Ar9xlWR4-MI9aJJ1q8PscWWlV4XfPhk5iLKeEPY24NQMawwgqA.JuNPfaga7nZfYJTPdtMADQ";

/** The lines a logger of the service's writes, parsed. */
function capturedLines() {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { lines, destination };
}

/**
 * README, "Logs": a preferences link's token is a capability, so no line holds one, whoever
 * writes it: Fastify's own warnings (their message, their error's message and stack) and its
 * `req` serializer included, which names the request by method and URL alone, never its address.
 */
describe("what the service's loggers write of a request", () => {
  it("Fastify's warning of a reply sent twice and its request shape show a preferences link without its token, and no client address", async () => {
    const { lines, destination } = capturedLines();
    const app = await buildGateway({
      transport: createDaemonTransport({ baseUrl: "http://127.0.0.1:9" }),
      operatorToken: generateOperatorToken(),
      inProcess: true,
      trustProxy: ["127.0.0.1"],
      logger: serviceLoggers("trace", destination).gateway,
    });
    // A route that replies twice, and Fastify's request line (its LogController's shape): both
    // about a request to an altered preferences link, which the root's not-found handler answers.
    app.addHook("onResponse", (request, reply, done) => {
      request.log.info({ req: request }, "incoming request");
      reply.send("again");
      done();
    });
    try {
      const answer = await app.inject({
        method: "GET",
        url: `/preferences/${TOKEN}/extra?saved=1`,
        headers: { "x-forwarded-for": "198.51.100.23", "user-agent": "Probe/7" },
      });
      expect(answer.statusCode).toBe(403);
    } finally {
      await app.close();
    }
    const text = lines.map((line) => JSON.stringify(line)).join("\n");
    expect(text).not.toContain(TOKEN.slice(0, 12));
    expect(text).not.toMatch(/198\.51\.100\.23|Probe\/7|remoteAddress|remotePort/);
    expect(lines).toContainEqual(
      expect.objectContaining({
        service: "consent-gateway",
        msg: "incoming request",
        req: { method: "GET", url: "/preferences/[redacted]/extra?saved=1" },
      }),
    );
    const twice = lines.find(
      (line) => (line.err as { code?: string })?.code === "FST_ERR_REP_ALREADY_SENT",
    );
    expect(twice).toMatchObject({
      level: 40,
      err: {
        message:
          'Reply was already sent, did you forget to "return reply" in "/preferences/[redacted]/extra?saved=1" (GET)?',
        stack: expect.stringContaining("/preferences/[redacted]/extra"),
      },
    });
  });
});

/**
 * The whole service at trace level, driven as its users drive it: no line it writes, on stdout or
 * stderr, holds a credential (an API key, the operator token, a dashboard session, a webhook
 * secret, a preferences token), a raw subject id, a client's address or its User-Agent; and a
 * caller that gives up on a call (a gRPC or Connect cancel, a REST client gone mid-request) is
 * its own choice, not a fault: nothing is logged at error level.
 */
describe("the service's log at trace level", () => {
  let dataDir: string | undefined;
  afterAll(async () => {
    await stopAllPrograms();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("holds no credential, subject id, address or User-Agent, and no error for a caller's cancel", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-log-lines-"));
    const { program, service } = await startService(dataDir, {
      CONSENT_LOG_LEVEL: "trace",
      CONSENT_TRUST_PROXY: "127.0.0.1",
      CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.0/8",
    });
    const secrets: string[] = [service.operatorToken];
    const visitor = { "x-forwarded-for": "198.51.100.23", "user-agent": "Probe/7 (secret-agent)" };
    const { teamId, key, publicId, webhook } = await subscribe(service, "http://127.0.0.1:9/hook");
    const { key: fullKey } = await mintKey(service, teamId);
    secrets.push(key, fullKey, webhook.secret);
    const { admin, auth } = operator(service);
    const session = (await admin.createSession({ teamId }, auth)).token;
    secrets.push(session);

    const posted = await postLog(service, aChoice(publicId), { headers: visitor });
    expect(posted.status).toBe(200);
    const link = new URL(posted.body.managePreferences).pathname;
    const token = link.split("/")[2] as string;
    secrets.push(token);
    const form = { "content-type": "application/x-www-form-urlencoded", ...visitor };
    const asVisitor = [
      http(service, "GET", link, { headers: visitor }),
      http(service, "POST", link, { body: "category=analytics", headers: form }),
      http(service, "POST", link, { body: "{}", headers: visitor }),
      http(service, "PUT", link, { headers: visitor }),
      http(service, "GET", `${link}/extra`, { headers: visitor }),
      http(service, "GET", `${link}x`, { headers: visitor }),
    ];
    for (const answer of await Promise.all(asVisitor)) expect(answer.status).toBeLessThan(500);

    const subjectId = "subject-7c1e-private";
    secrets.push(subjectId);
    const subject = { bannerId: publicId, subjectId };
    const asIntegrator = [
      http(service, "PUT", "/api/v1/consent/subjects/state", {
        key: fullKey,
        body: { ...subject, baseVersion: 0, consentState: consentState() },
        headers: visitor,
      }),
      http(service, "POST", "/api/v1/consent/subjects/resolve", { key: fullKey, body: subject }),
      http(service, "GET", "/api/v1/banners", {
        headers: { cookie: `consent_session=${session}` },
      }),
      http(service, "GET", "/api/v1/banners", { key: `${fullKey.slice(0, -4)}AAAA` }),
      http(service, "GET", "/api/v1/banners", { key: service.operatorToken }),
    ];
    for (const answer of await Promise.all(asIntegrator)) expect(answer.status).toBeLessThan(500);

    // REST clients that leave: with the request sent, and halfway through a body.
    const port = Number(new URL(service.gatewayUrl).port);
    for (const target of [link, "/api/v1/banners", "/api/v1/consent/subjects/state"]) {
      const sent = connect(port, "127.0.0.1");
      sent.on("error", () => {});
      sent.write(
        `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fullKey}\r\nX-Forwarded-For: 198.51.100.23\r\n\r\n`,
      );
      const halfway = connect(port, "127.0.0.1");
      halfway.on("error", () => {});
      halfway.write(
        `POST ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fullKey}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncategory=`,
      );
      await new Promise((resolve) => setTimeout(resolve, 20));
      sent.destroy();
      halfway.destroy();
    }

    // Callers of the daemon that cancel, in each protocol, at once or partway through a stream.
    const headers = { authorization: `Bearer ${fullKey}` };
    const transports = [
      createGrpcTransport({ baseUrl: service.daemonUrl }),
      createGrpcWebTransport({ baseUrl: service.daemonUrl, httpVersion: "2" }),
      createConnectTransport({ baseUrl: service.daemonUrl, httpVersion: "2" }),
      createConnectTransport({ baseUrl: service.daemonUrl, httpVersion: "1.1" }),
    ];
    for (const transport of transports) {
      const banners = createClient(BannerService, transport);
      const logs = createClient(ConsentLogService, transport);
      for (let n = 0; n < 6; n++) {
        const unary = new AbortController();
        const listed = banners.listBanners({}, { signal: unary.signal, headers }).catch(() => {});
        setTimeout(() => unary.abort(), n);
        await listed;
        const stream = new AbortController();
        const tail = logs.tailConsentLogs(
          { bannerId: publicId },
          { signal: stream.signal, headers },
        );
        setTimeout(() => stream.abort(), n * 5);
        await (async () => {
          for await (const _ of tail);
        })().catch(() => {});
      }
    }

    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await program.stop()).toBe(0);
    const written = `${program.stdout()}\n${program.stderr()}`;
    for (const secret of secrets) expect(written).not.toContain(secret);
    expect(written).not.toMatch(/198\.51\.100\.23|secret-agent|remoteAddress/);
    const jsonLines = written.split("\n").filter((line) => line.startsWith("{"));
    expect(jsonLines.length).toBeGreaterThan(0);
    expect(jsonLines.map((line) => JSON.parse(line)).filter((line) => line.level >= 50)).toEqual(
      [],
    );
    expect(program.stderr()).toBe("");
  });
});
