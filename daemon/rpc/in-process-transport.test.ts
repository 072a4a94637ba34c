import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Code, ConnectError, createClient, createContextValues } from "@connectrpc/connect";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CallerHeaders, callerOf, kPeerAddress } from "#daemon/auth/caller.js";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { CALL_FINISHED, createInProcessTransport } from "#daemon/rpc/in-process-transport.js";
import { createDaemon } from "#daemon/server.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { httpErrorOf } from "#gateway/errors.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import {
  Health,
  HealthCheckResponse_ServingStatus as Status,
} from "#gen/grpc/health/v1/health_pb.js";
import { headerRecord } from "#test/support/consent-log.js";

describe("the in-process transport (npm start's gateway → daemon hop)", () => {
  let dataDir: string;
  let store: Store;
  const operatorToken = generateOperatorToken();
  let transport: ReturnType<typeof createInProcessTransport>;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-in-process-"));
    store = await openLmdbStore({ dataDir });
    const daemon = createDaemon({
      store,
      operatorToken,
      identityKeys: [],
      baseUrl: "http://127.0.0.1:8080",
      logger: pino({ level: "silent" }),
    });
    transport = createInProcessTransport({
      routes: daemon.routes,
      interceptors: daemon.interceptors,
    });
  });
  afterAll(async () => {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("answers a unary call with the service's message", async () => {
    const health = createClient(Health, transport);
    expect((await health.check({ service: "" })).status).toBe(Status.SERVING);
  });

  it("delivers domain failures as ConnectErrors with their ErrorInfo, as the network does", async () => {
    const subjects = createClient(SubjectService, transport);
    const failure = await subjects
      .resolveSubject({ json: new TextEncoder().encode("{}") })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConnectError);
    expect((failure as ConnectError).code).toBe(Code.Unauthenticated);
    expect((failure as ConnectError).findDetails(ErrorInfoSchema)[0]?.code).toBe("unauthorized");
    expect(httpErrorOf(failure)).toMatchObject({ status: 401, code: "unauthorized" });
  });

  it("turns an unexpected error into a bare internal error", async () => {
    const failing = createInProcessTransport({
      routes: (router) =>
        router.service(Health, {
          check() {
            throw new Error("secret internal detail");
          },
        }),
    });
    const failure = await createClient(Health, failing)
      .check({ service: "" })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConnectError);
    expect(httpErrorOf(failure)).toMatchObject({ status: 500, code: "internal_error" });
  });

  it("answers unimplemented for a service it does not serve", async () => {
    const empty = createInProcessTransport({ routes: () => {} });
    const failure = await createClient(Health, empty)
      .check({ service: "" })
      .catch((error: unknown) => error);
    expect((failure as ConnectError).code).toBe(Code.Unimplemented);
  });

  it("carries the caller's headers and context values, and returns response headers", async () => {
    const seen: { clientIp?: string; peer?: string } = {};
    const probe = createInProcessTransport({
      routes: (router) =>
        router.service(Health, {
          check(_request, ctx) {
            seen.clientIp = callerOf(ctx, operatorToken).clientIp;
            seen.peer = ctx.values.get(kPeerAddress);
            ctx.responseHeader.set("x-ratelimit-limit", "5000");
            return { status: Status.SERVING };
          },
        }),
    });
    let limit: string | null = null;
    await createClient(Health, probe).check(
      { service: "" },
      {
        headers: {
          [CallerHeaders.clientIp]: "203.0.113.7",
          [CallerHeaders.gatewayToken]: operatorToken,
        },
        contextValues: createContextValues().set(kPeerAddress, "127.0.0.9"),
        onHeader: (headers) => {
          limit = headers.get("x-ratelimit-limit");
        },
      },
    );
    expect(seen).toEqual({ clientIp: "203.0.113.7", peer: "127.0.0.9" });
    expect(limit).toBe("5000");
  });

  it("hands a handler the caller's headers as Headers reads them, however the caller wrote them", async () => {
    const seen: Record<string, unknown>[] = [];
    const probe = createInProcessTransport({
      routes: (router) =>
        router.service(Health, {
          check(_request, ctx) {
            const caller = callerOf(ctx, operatorToken);
            seen.push({
              bearer: caller.bearer,
              origin: caller.origin,
              team: caller.team,
              clientIp: caller.clientIp,
              header: headerRecord(ctx.requestHeader),
            });
            return { status: Status.SERVING };
          },
        }),
      interceptors: [
        (next) => (request) => {
          // An interceptor reads the very Headers and values the handler reads.
          if (request.header.get("consent-team") !== request.header.get("Consent-Team")) {
            throw new Error("header names are not case-blind");
          }
          return next(request);
        },
      ],
    });
    const health = createClient(Health, probe);
    const expected = {
      bearer: "k1",
      origin: "https://shop.example.com",
      team: "t1",
      clientIp: "203.0.113.7",
      header: {
        authorization: "Bearer k1",
        "consent-client-ip": "203.0.113.7",
        "consent-gateway-token": operatorToken,
        "consent-origin": "https://shop.example.com",
        "consent-team": "t1",
      },
    };
    const record = {
      authorization: "Bearer k1",
      "consent-origin": "https://shop.example.com",
      "consent-team": "t1",
      [CallerHeaders.clientIp]: "203.0.113.7",
      [CallerHeaders.gatewayToken]: operatorToken,
    };
    await health.check({ service: "" }, { headers: record });
    // Names in capitals and values with blanks around them, which Headers folds and trims.
    await health.check(
      { service: "" },
      {
        headers: {
          Authorization: " Bearer k1\t",
          "Consent-Origin": "https://shop.example.com ",
          "consent-team": "t1",
          [CallerHeaders.clientIp]: "203.0.113.7",
          [CallerHeaders.gatewayToken]: operatorToken,
        },
      },
    );
    await health.check({ service: "" }, { headers: Object.entries(record) });
    await health.check({ service: "" }, { headers: new Headers(record) });
    expect(seen).toEqual([expected, expected, expected, expected]);
  });

  it("refuses a header Headers refuses before any handler runs, as a server's context does", async () => {
    let ran = false;
    const probe = createInProcessTransport({
      routes: (router) =>
        router.service(Health, {
          check() {
            ran = true;
            return { status: Status.SERVING };
          },
        }),
    });
    const failure = await createClient(Health, probe)
      .check({ service: "" }, { headers: { authorization: "Bearer a\r\nb" } })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(TypeError);
    expect(ran).toBe(false);
  });

  it("gives interceptors the context's signal, aborted once the call is over", async () => {
    let signal: AbortSignal | undefined;
    let handlerSignal: AbortSignal | undefined;
    const probe = createInProcessTransport({
      routes: (router) =>
        router.service(Health, {
          check(_request, ctx) {
            handlerSignal = ctx.signal;
            return { status: Status.SERVING };
          },
        }),
      interceptors: [
        (next) => (request) => {
          signal = request.signal;
          return next(request);
        },
      ],
    });
    await createClient(Health, probe).check({ service: "" });
    expect(signal).toBe(handlerSignal);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBe(CALL_FINISHED);
  });

  it("streams a server-streaming call and ends its context when the caller stops reading", async () => {
    const health = createClient(Health, transport);
    const statuses: Status[] = [];
    for await (const answer of health.watch({ service: "" })) {
      statuses.push(answer.status);
      break;
    }
    expect(statuses).toEqual([Status.SERVING]);
  });
});
