import { Code, type Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import { readOperatorToken } from "#daemon/bootstrap.js";
import { type Config, ConfigError, listenFailure, loadConfig } from "#daemon/config.js";
import { boundedDrain, stopOnSignals } from "#daemon/drain-exit.js";
import { serviceLoggers } from "#daemon/logging.js";
import { buildGateway } from "#gateway/app.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { operatorTokenVerdict } from "#gateway/token-watch.js";

export interface StartGatewayOptions {
  config: Config;
  transport: Transport;
  operatorToken: string;
  logger: Logger;
  /** The in-process daemon's publish hook (see GatewayOptions). */
  onPublicChange?: (listener: (publicId: string) => void) => void;
  /** Run shortly before a shutdown's drain cuts the connections still open (boundedDrain). */
  beforeCut?: () => void;
  /** The transport calls the daemon in this process (GatewayOptions.inProcess). */
  inProcess?: boolean;
  /**
   * The setting of the daemon's port in this process when it has the gateway's value (npm start),
   * so a refused listen says that the two are the same.
   */
  portSharedWith?: string;
  /** GatewayOptions.repeatedFailureLogMs: REPEATED_FAILURE_LOG_MS unless a test shortens it. */
  repeatedFailureLogMs?: number;
}

/** Builds the gateway and listens on CONSENT_HTTP_HOST:CONSENT_HTTP_PORT. */
export async function startGateway(options: StartGatewayOptions) {
  const app = await buildGateway({
    transport: options.transport,
    operatorToken: options.operatorToken,
    inProcess: options.inProcess,
    trustProxy: options.config.trustProxy,
    logger: options.logger,
    geoHeader: options.config.geoHeader,
    loaderCacheBytes: options.config.loaderCacheMb * 1024 * 1024,
    onPublicChange: options.onPublicChange,
    repeatedFailureLogMs: options.repeatedFailureLogMs,
  });
  const beginDrain = boundedDrain(app.server, options.config.drainTimeoutMs, options.beforeCut);
  try {
    await app.listen({ host: options.config.httpHost, port: options.config.httpPort });
  } catch (error) {
    throw listenFailure(error, {
      host: "CONSENT_HTTP_HOST",
      port: "CONSENT_HTTP_PORT",
      samePortAs: options.portSharedWith,
    });
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : options.config.httpPort;
  const host = options.config.httpHost.includes(":")
    ? `[${options.config.httpHost}]`
    : options.config.httpHost;
  return { app, url: `http://${host}:${port}`, close: () => drain(app, beginDrain) };
}

/**
 * Stops accepting, lets in-flight requests finish, and bounds the wait (boundedDrain).
 * server.close() closes only the sockets idle at that moment; a keep-alive socket whose request
 * finishes later turns idle afterwards, so idle sockets are swept until the server has closed.
 */
async function drain(
  app: Awaited<ReturnType<typeof buildGateway>>,
  beginDrain: () => void,
): Promise<void> {
  beginDrain();
  const sweep = setInterval(() => app.server.closeIdleConnections(), 25);
  try {
    await app.close();
  } finally {
    clearInterval(sweep);
  }
}

/** The gateway as its own process, reaching the daemon at CONSENT_DAEMON_URL over HTTP/2. */
export async function runStandaloneGateway(config: Config = loadConfig()) {
  const logger = serviceLoggers(config.logLevel).gateway;
  const stop = stopOnSignals(logger);
  const operatorToken = await readOperatorToken(config);
  if (!operatorToken) {
    throw new ConfigError(
      `No operator token: set CONSENT_ADMIN_TOKEN, or CONSENT_DATA_DIR to the daemon's data directory (${config.dataDir} has no admin-token).`,
    );
  }
  // The daemon serves gRPC, gRPC-Web and Connect on one port (decisions §7); the gateway calls it
  // in the Connect protocol, binary, over HTTP/2 (gateway/daemon-transport.ts). A daemon shutting
  // down answers the calls in flight within its drain limit, which the gateway waits out: the same
  // CONSENT_DRAIN_TIMEOUT_MS as its own (README, "Running the parts separately").
  const transport = createDaemonTransport({
    baseUrl: config.daemonUrl,
    drainTimeoutMs: config.drainTimeoutMs,
  });
  await checkOperatorToken(transport, operatorToken, config.daemonUrl, logger);
  const gateway = await startGateway({
    config,
    transport,
    operatorToken,
    logger,
    // Requests still waiting on the daemon when the drain runs out are answered 503, not cut.
    beforeCut: () => transport.abandonCalls(),
  });
  process.stdout.write(
    `consent gateway listening on ${gateway.url}, daemon at ${config.daemonUrl}\n`,
  );
  stop.started(() => gateway.close());
}

/** How long start-up waits for the daemon to judge the token before going on without it. */
const TOKEN_CHECK_MS = 2_000;

/**
 * A gateway whose operator token is not its daemon's would serve, but the daemon would ignore the
 * client addresses it relays (daemon/auth/caller.ts): every REST client would share the
 * gateway's address for the per-IP limits and the failed-authentication lockout. So the token is
 * put to the daemon once, as the daemon judges the gateway's relayed calls (operatorTokenVerdict):
 * refused, start-up stops with a ConfigError. The daemon's token is accepted even while this
 * host's address is locked out for failed attempts, so the lockout of this host's address is an
 * answer to a token the daemon does not take, in place of its refusal (spec 8): start-up stops
 * alike. A daemon that cannot be reached yet judges it on the gateway's first call instead, where
 * the token watch (token-watch.ts) answers a refusal with 503 and logs it, as it does for a token
 * the daemon stops accepting later.
 */
async function checkOperatorToken(
  transport: Transport,
  operatorToken: string,
  daemonUrl: string,
  logger: Logger,
): Promise<void> {
  const refusal = `the daemon at ${daemonUrl} refuses this gateway's operator token, so it would ignore the client addresses the gateway relays: give the gateway the daemon's own token (CONSENT_ADMIN_TOKEN, or CONSENT_DATA_DIR set to the daemon's data directory)`;
  const first = await operatorTokenVerdict(transport, operatorToken, TOKEN_CHECK_MS);
  if (first === "refused" || first === "locked out") throw new ConfigError(refusal);
  if (first === "accepted") return;
  logger.warn(
    `could not check the operator token with the daemon at ${daemonUrl} (${Code[first]}); its first answer to a call will, and a refusal is logged then`,
  );
}
