import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { loadSecrets } from "#daemon/bootstrap.js";
import type { Clock } from "#daemon/clock.js";
import { type Config, loadConfig } from "#daemon/config.js";
import { parseIdentityKeys } from "#daemon/identity/subject-identity.js";
import { createInProcessTransport } from "#daemon/rpc/in-process-transport.js";
import { createDaemon, listenDaemon } from "#daemon/server.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import type { Load } from "#daemon/webhooks/load-gauge.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";

export interface TestService {
  /** http://127.0.0.1:<port> of the daemon (gRPC, gRPC-Web, Connect). */
  daemonUrl: string;
  /** http://127.0.0.1:<port> of the REST gateway, when started with `gateway: true`. */
  gatewayUrl: string;
  operatorToken: string;
  dataDir: string;
  config: Config;
  store: Store;
  close(): Promise<void>;
}

export interface TestServiceOptions {
  /**
   * Also start the REST gateway: with the in-process transport, as `npm start` does, or, when the
   * environment sets CONSENT_TEST_GATEWAY=network (the "split" vitest project), with the
   * stand-alone gateway's transport over the daemon's port.
   */
  gateway?: boolean;
  /** Environment overrides (CONSENT_TRUST_PROXY, CONSENT_IDENTITY_KEY, ...). */
  env?: Record<string, string>;
  /** Identity keys to use instead of the generated one; [] makes hashing unavailable. */
  identityKeys?: string[];
  clock?: Clock;
  /** Reuse this data directory (kept on close) instead of a fresh temp one. */
  dataDir?: string;
  /**
   * The load webhook delivery yields to. By default never busy: a test's own bursts must not
   * slow its deliveries (the tests of yielding set their own).
   */
  load?: Load;
  /** How long a call's request has to arrive on the daemon's port (REQUEST_ARRIVAL_MS). */
  requestArrivalMs?: number;
  /** The daemon port's REQUEST_BUDGET_BYTES, shrunk. */
  requestBudgetBytes?: number;
  /** How often the daemon's port looks for connections that stopped answering (SESSION_PROBE_MS). */
  sessionProbeMs?: number;
  /** How long a connection to the daemon's port may be idle (IDLE_SESSION_MS). */
  idleSessionMs?: number;
  /** Receives each log entry (pino's JSON line, parsed), at every level from `warn` up. */
  onLog?: (entry: Record<string, unknown>) => void;
  /**
   * How late the store says a consent log row may become readable (ConsentLogStore.lateRowsMs),
   * instead of the embedded store's 5 s: a log tail then reads as far back as over MongoDB.
   */
  lateRowsMs?: number;
  /**
   * How long one read of the consent log may run (the embedded store's logReadLimitMs), below
   * what CONSENT_LOG_READ_TIMEOUT_MS accepts: 0 stops every read at its first checkpoint, a
   * thousand rows in.
   */
  logReadLimitMs?: number;
  /**
   * How long a webhook attempt or test send may take, instead of DELIVERY_TIMEOUT_MS (15 s): for
   * a test that waits one out.
   */
  webhookDeliveryTimeoutMs?: number;
  /**
   * How often the gateway's outage lines tell a lasting outage, instead of REPEATED_FAILURE_LOG_MS
   * (10 s): for a test that waits one interval out.
   */
  repeatedFailureLogMs?: number;
}

/**
 * Starts a real daemon (and optionally the gateway) on free ports over the embedded store in a
 * fresh temp directory, the way `npm start` composes them. close() stops everything and removes
 * the directory.
 */
export async function startTestService(options: TestServiceOptions = {}): Promise<TestService> {
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(tmpdir(), "consent-test-")));
  const config = loadConfig({
    CONSENT_DATA_DIR: dataDir,
    CONSENT_GRPC_PORT: "0",
    CONSENT_HTTP_PORT: "0",
    CONSENT_LOG_LEVEL: process.env.CONSENT_TEST_LOG_LEVEL ?? "silent",
    ...options.env,
  });
  const onLog = options.onLog;
  const logger = onLog
    ? pino({ level: "warn" }, { write: (line: string) => onLog(JSON.parse(line)) })
    : pino({ level: config.logLevel });
  const secrets = await loadSecrets(config);
  const identityKeys =
    options.identityKeys === undefined
      ? secrets.identityKeys
      : options.identityKeys.length === 0
        ? []
        : parseIdentityKeys(options.identityKeys.join(","));
  const lmdb = await openLmdbStore({
    dataDir,
    logReadLimitMs: options.logReadLimitMs ?? config.logReadTimeoutMs,
  });
  const { lateRowsMs } = options;
  const store =
    lateRowsMs === undefined ? lmdb : { ...lmdb, consentLog: { ...lmdb.consentLog, lateRowsMs } };
  const daemon = createDaemon({
    store,
    operatorToken: secrets.operatorToken,
    identityKeys,
    baseUrl: config.baseUrl,
    logger,
    clock: options.clock,
    load: options.load ?? { busy: () => false },
    // A short poll, so tests that move the clock see due retries promptly.
    webhooks: {
      allowCidrs: config.webhookAllowCidrs,
      pollIntervalMs: 50,
      deliveryTimeoutMs: options.webhookDeliveryTimeoutMs,
    },
  });
  const server = await listenDaemon(daemon, {
    host: "127.0.0.1",
    port: 0,
    logger,
    requestArrivalMs: options.requestArrivalMs,
    requestBudgetBytes: options.requestBudgetBytes,
    sessionProbeMs: options.sessionProbeMs,
    idleSessionMs: options.idleSessionMs,
  });
  let gateway: { url: string; close(): Promise<unknown> } | undefined;
  if (options.gateway) {
    const { startGateway } = await import("#gateway/main.js");
    const network = process.env.CONSENT_TEST_GATEWAY === "network";
    const transport = network
      ? createDaemonTransport({ baseUrl: server.url })
      : createInProcessTransport({ routes: daemon.routes, interceptors: daemon.interceptors });
    gateway = await startGateway({
      config,
      transport,
      operatorToken: secrets.operatorToken,
      inProcess: !network,
      logger,
      // The stand-alone gateway hears of no publish but its own (gateway/main.ts).
      onPublicChange: network ? undefined : daemon.onPublicChange,
      repeatedFailureLogMs: options.repeatedFailureLogMs,
    });
  }
  return {
    daemonUrl: server.url,
    gatewayUrl: gateway?.url ?? "",
    operatorToken: secrets.operatorToken,
    dataDir,
    config: { ...config, daemonUrl: server.url },
    store,
    async close() {
      await gateway?.close();
      await server.app.close();
      await store.close();
      if (!options.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
