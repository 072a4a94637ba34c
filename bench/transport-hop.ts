import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  type ConnectRouter,
  createClient,
  createContextValues,
  createHandlerContext,
  createRouterTransport,
  type ServiceImpl,
  type Transport,
} from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { pino } from "pino";
import { CallerHeaders } from "#daemon/auth/caller.js";
import { createHealthService } from "#daemon/health/health-service.js";
import { parseIdentityKeys } from "#daemon/identity/subject-identity.js";
import { createInProcessTransport } from "#daemon/rpc/in-process-transport.js";
import { createDaemon, type Daemon } from "#daemon/server.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ResolveSubjectRequestSchema, SubjectService } from "#gen/consent/v1/subject_pb.js";
import {
  Health,
  HealthCheckResponse_ServingStatus as Status,
} from "#gen/grpc/health/v1/health_pb.js";
import { ALL_SCOPES } from "#test/support/api.js";
import { firstWriteBody } from "./fixture.js";
import {
  freePort,
  processCpuMs,
  REPO_ROOT,
  startProcess,
  stopProcess,
  waitUntil,
} from "./service.js";

/**
 * What the gateway → daemon hop costs, as evidence for the profile findings in README.md:
 * 1. an empty call (`grpc.health.v1.Health/Check`) through connect-es' in-memory router
 *    transport, through the in-process transport `npm start` uses, over gRPC/HTTP/2 to a consentd
 *    process, and with the Connect protocol over HTTP/2 to the same process, from connect-node's
 *    transport and from the stand-alone gateway's (split mode);
 * 2. a real resolve (auth, rate limit, store, hashing) through both in-memory transports, and the
 *    same call made on the SubjectService implementation directly.
 * Run: `node --import tsx bench/transport-hop.ts [calls] [concurrency]`.
 */

const [calls = 20_000, concurrency = 50] = process.argv.slice(2).map(Number);
const encoder = new TextEncoder();
/** Calls made before each measurement, not measured. */
const WARM_UP_CALLS = 2_000;
/** Resolve measurements below, each of WARM_UP_CALLS + calls on the same keys. */
const RESOLVE_MEASUREMENTS = 3;

/** Runs `call` `calls` times, `concurrency` at a time, and prints calls/s and CPU per call. */
async function measure(label: string, call: () => Promise<unknown>, daemonPid?: number) {
  for (let i = 0; i < WARM_UP_CALLS; i++) await call();
  const daemonCpuMs = async () => (daemonPid ? ((await processCpuMs([daemonPid])) ?? 0) : 0);
  const daemonBefore = await daemonCpuMs();
  const before = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = 0; i < calls / concurrency; i++) await call();
    }),
  );
  const elapsedMs = performance.now() - started;
  const own = process.cpuUsage(before);
  const daemonUs = (((await daemonCpuMs()) - daemonBefore) * 1000) / calls;
  const rate = Math.round((calls / elapsedMs) * 1000).toLocaleString("en-US");
  process.stdout.write(
    `  ${label.padEnd(40)} ${rate.padStart(7)} calls/s   CPU per call: ${Math.round(
      (own.user + own.system) / calls,
    )} µs here${daemonPid ? ` + ${Math.round(daemonUs)} µs in consentd` : ""}\n`,
  );
}

/**
 * A fresh data directory, removed when this process exits whichever way it ends: a failed step
 * or a crash (an error no `finally` sees) leaves no consent-hop-* behind in the temp folder.
 */
async function temporaryDataDir(): Promise<string> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "consent-hop-"));
  process.once("exit", () => rmSync(dataDir, { recursive: true, force: true }));
  return dataDir;
}

const healthCheck = (transport: Transport) => {
  const client = createClient(Health, transport);
  return () => client.check({ service: "" });
};

async function emptyCalls() {
  process.stdout.write("Empty call (Health/Check):\n");
  const pingOnlyStore = { kind: "lmdb", ping: async () => {} } as unknown as Store;
  const inMemory = createRouterTransport((router) => {
    router.service(Health, createHealthService(pingOnlyStore, []));
  });
  await measure("createRouterTransport (in memory)", healthCheck(inMemory));
  const inProcess = createInProcessTransport({
    routes: (router) => router.service(Health, createHealthService(pingOnlyStore, [])),
  });
  await measure("in-process (npm start)", healthCheck(inProcess));

  const dataDir = await temporaryDataDir();
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const logFile = path.join(REPO_ROOT, "bench", "results", "transport-hop.log");
  let consentd: ChildProcess | undefined;
  try {
    consentd = startProcess("consentd", ["bin/consentd.js"], {
      env: {
        CONSENT_DATA_DIR: dataDir,
        CONSENT_GRPC_PORT: String(port),
        CONSENT_LOG_LEVEL: "warn",
      },
      logFile,
    });
    const grpc = createGrpcTransport({ baseUrl });
    const serving = async () => (await healthCheck(grpc)()).status === Status.SERVING;
    await waitUntil("consentd", serving, [consentd], logFile);
    await measure("gRPC over HTTP/2", healthCheck(grpc), consentd.pid);
    // The daemon's port also speaks the Connect protocol; binary unary calls take its short way
    // (daemon/rpc/connect-unary-route.ts), from connect-node's transport as from the gateway's.
    const connect = createConnectTransport({ baseUrl, httpVersion: "2", useBinaryFormat: true });
    await measure("Connect, binary, connect-node client", healthCheck(connect), consentd.pid);
    const gateway = createDaemonTransport({ baseUrl });
    await measure("Connect, binary, gateway client (split)", healthCheck(gateway), consentd.pid);
  } finally {
    if (consentd) await stopProcess(consentd);
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The SubjectService implementation the daemon registers, captured from its routes. */
function subjectServiceOf(daemon: Daemon): ServiceImpl<typeof SubjectService> {
  let impl: ServiceImpl<typeof SubjectService> | undefined;
  const capture = {
    service(service: { typeName: string }, serviceImpl: unknown) {
      if (service.typeName === SubjectService.typeName) {
        impl = serviceImpl as ServiceImpl<typeof SubjectService>;
      }
      return capture;
    },
  };
  daemon.routes(capture as unknown as ConnectRouter);
  if (!impl) throw new Error("the daemon registers no SubjectService");
  return impl;
}

async function resolveCalls() {
  process.stdout.write("Resolve of a stored subject (auth, rate limit, store, hashing):\n");
  const dataDir = await temporaryDataDir();
  let store: Store | undefined;
  try {
    store = await openLmdbStore({ dataDir });
    const operatorToken = `consent_op_${randomBytes(32).toString("base64url")}`;
    const daemon = createDaemon({
      store,
      operatorToken,
      identityKeys: parseIdentityKeys(randomBytes(32).toString("base64")),
      baseUrl: "http://localhost:8080",
      logger: pino({ level: "silent" }),
    });
    const transport = createRouterTransport(daemon.routes, {
      router: { interceptors: daemon.interceptors },
    });
    const admin = createClient(AdminService, transport);
    const operator = { headers: { authorization: `Bearer ${operatorToken}` } };
    const { team } = await admin.createTeam({ name: "Hop", plan: "enterprise" }, operator);
    const keys: string[] = [];
    // Each key allows 5,000 calls per 15 minutes; 4,000 each leaves room for the set-up calls.
    const resolveCalls = RESOLVE_MEASUREMENTS * (WARM_UP_CALLS + calls);
    for (let i = 0; i < Math.ceil(resolveCalls / 4_000); i++) {
      const minted = await admin.createApiKey(
        { teamId: team?.id, environment: "live", scopes: ALL_SCOPES, name: "hop" },
        operator,
      );
      keys.push(minted.secret);
    }
    let next = 0;
    // As the gateway relays a REST call (gateway/relay.ts).
    const relayed = () => ({
      [CallerHeaders.authorization]: `Bearer ${keys[next++ % keys.length]}`,
      [CallerHeaders.clientIp]: "127.0.0.1",
      [CallerHeaders.gatewayToken]: operatorToken,
    });
    const bannerJson = { name: "Hop", domain: "shop.example.com", configuration: {} };
    const { banner } = await createClient(BannerService, transport).createBanner(
      { json: encoder.encode(JSON.stringify(bannerJson)) },
      { headers: relayed() },
    );
    const publicId = banner?.publicId ?? "";
    const subjects = createClient(SubjectService, transport);
    const put = encoder.encode(firstWriteBody(publicId, "hop-subject"));
    await subjects.putSubjectState({ json: put }, { headers: relayed() });
    const json = encoder.encode(
      JSON.stringify({ bannerId: publicId, namespace: "default", subjectId: "hop-subject" }),
    );

    await measure("through createRouterTransport", async () => {
      const { found } = await subjects.resolveSubject({ json }, { headers: relayed() });
      if (!found) throw new Error("resolve found nothing");
    });
    const inProcess = createClient(
      SubjectService,
      createInProcessTransport({ routes: daemon.routes, interceptors: daemon.interceptors }),
    );
    await measure("through the in-process transport", async () => {
      const { found } = await inProcess.resolveSubject({ json }, { headers: relayed() });
      if (!found) throw new Error("resolve found nothing");
    });
    const impl = subjectServiceOf(daemon);
    const request = create(ResolveSubjectRequestSchema, { json });
    await measure("SubjectService implementation, directly", async () => {
      const ctx = createHandlerContext({
        service: SubjectService,
        method: SubjectService.method.resolveSubject,
        protocolName: "direct",
        requestMethod: "POST",
        url: "",
        requestHeader: relayed(),
        contextValues: createContextValues(),
      });
      const { found } = await impl.resolveSubject(request, ctx);
      if (!found) throw new Error("resolve found nothing");
    });
  } finally {
    await store?.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

process.stdout.write(`${calls} calls, ${concurrency} in flight, Node ${process.version}\n`);
await emptyCalls();
await resolveCalls();
process.exit(0);
