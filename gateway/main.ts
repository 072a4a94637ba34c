import type { Transport } from "@connectrpc/connect";
import type { Logger } from "pino";
import { readOperatorToken } from "#daemon/bootstrap.js";
import { type Config, ConfigError, loadConfig } from "#daemon/config.js";
import { boundedDrain, stopOnSignals } from "#daemon/drain-exit.js";
import { serviceLoggers } from "#daemon/logging.js";
import { buildGateway } from "#gateway/app.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";

export interface StartGatewayOptions {
  config: Config;
  transport: Transport;
  operatorToken: string;
  logger: Logger;
  /** The in-process daemon's publish hook (see GatewayOptions). */
  onPublicChange?: (listener: (publicId: string) => void) => void;
  /** Run shortly before a shutdown's drain cuts the connections still open (boundedDrain). */
  beforeCut?: () => void;
}

/** Builds the gateway and listens on CONSENT_HTTP_HOST:CONSENT_HTTP_PORT. */
export async function startGateway(options: StartGatewayOptions) {
  const app = await buildGateway({
    transport: options.transport,
    operatorToken: options.operatorToken,
    trustProxy: options.config.trustProxy,
    logger: options.logger,
    geoHeader: options.config.geoHeader,
    onPublicChange: options.onPublicChange,
  });
  const beginDrain = boundedDrain(app.server, options.beforeCut);
  await app.listen({ host: options.config.httpHost, port: options.config.httpPort });
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
  // in the Connect protocol, binary, over HTTP/2 (gateway/daemon-transport.ts).
  const transport = createDaemonTransport({ baseUrl: config.daemonUrl });
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
