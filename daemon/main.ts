import type { Logger } from "pino";
import { exposedFiles, loadSecrets } from "#daemon/bootstrap.js";
import { systemClock } from "#daemon/clock.js";
import { warnOfClockBehindStore } from "#daemon/clock-check.js";
import { type Config, listenFailure, loadConfig, StartupError } from "#daemon/config.js";
import { stopOnSignals } from "#daemon/drain-exit.js";
import type { IdentityKey } from "#daemon/identity/subject-identity.js";
import { serviceLoggers } from "#daemon/logging.js";
import { schedulePurge } from "#daemon/purge.js";
import { createInProcessTransport } from "#daemon/rpc/in-process-transport.js";
import { createDaemon, type Daemon, listenDaemon } from "#daemon/server.js";
import type { Store } from "#daemon/store/store.js";
import type { ResealOutcome } from "#daemon/webhooks/reseal-secrets.js";
import { printWelcome, storeOutlook } from "#daemon/welcome.js";
import {
  workerCachedWrites,
  workerPublicChanges,
  workerStoreDamage,
} from "#daemon/worker-messages.js";

/** The one place that picks the store adapter: MongoDB when MONGODB_URI is set, else LMDB. */
export async function openStore(
  config: Config,
  logger?: Logger,
  {
    filesChecked = false,
    onDamage,
  }: { filesChecked?: boolean; onDamage?: (reason: string) => void } = {},
): Promise<Store> {
  if (config.mongoUri) {
    const { openMongoStore } = await import("#daemon/store/mongo-store.js");
    return openMongoStore({ uri: config.mongoUri, timeoutMs: config.mongoTimeoutMs });
  }
  const { openLmdbStore } = await import("#daemon/store/lmdb-store.js");
  const { unreadableStore } = await import("#daemon/store/lmdb-preflight.js");
  // Once per start: a worker's primary has read the files before forking it.
  const unreadable = filesChecked ? undefined : await unreadableStore(config.dataDir);
  if (unreadable) {
    throw new StartupError(
      `cannot read the embedded store in ${config.dataDir}: ${unreadable}. Its files are damaged (a copy cut short, a disk fault) or not this user's to use; restore the directory from a backup (consentctl backup makes one)`,
    );
  }
  try {
    return await openLmdbStore({
      dataDir: config.dataDir,
      minFreeBytes: config.minFreeMb * 1024 * 1024,
      logReadLimitMs: config.logReadTimeoutMs,
      onRoomChange: (refusing, message) =>
        refusing ? logger?.error(message) : logger?.info(message),
      onDamage,
    });
  } catch (error) {
    // Files the process may not write, a full disk: the operator's to fix, told in one line.
    throw new StartupError(
      `cannot open the embedded store in ${config.dataDir}: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/**
 * consentd: serves the daemon; with `withGateway` (what `npm start` runs) the REST gateway runs in
 * the same process and reaches the daemon through an in-memory transport.
 */
export async function runDaemon(options: {
  withGateway: boolean;
  config?: Config;
  /**
   * What to print once listening: by default the URLs and what this start created; `false` for a
   * silent worker of `npm start` (daemon/workers.ts), whose primary created the secrets.
   */
  welcome?: { created: string[] } | false;
  /** The store's files were read already (by the primary of `npm start`'s workers). */
  storeFilesChecked?: boolean;
}) {
  const config = options.config ?? loadConfig();
  const loggers = serviceLoggers(config.logLevel);
  const logger = loggers.daemon;
  const stop = stopOnSignals(logger);
  const secrets = await loadSecrets(config);
  if (secrets.identityProblem) {
    logger.error(
      `subject identity hashing is unavailable: ${secrets.identityProblem}; subject endpoints answer 503`,
    );
  }
  let relayDamage = (_reason: string) => {};
  const store = await openStore(config, logger, {
    filesChecked: options.storeFilesChecked,
    onDamage(reason) {
      logger.error(
        `the embedded store in ${config.dataDir} is damaged (${reason}): health reports the service unavailable from now on; restart the service, and if the error comes back, restore the directory from a backup (consentctl backup makes one)`,
      );
      relayDamage(reason);
    },
  });
  relayDamage = workerStoreDamage(store);
  let forgetCachedReads = () => {};
  const relayCachedWrite = workerCachedWrites(() => forgetCachedReads());
  const daemon = createDaemon({
    store,
    onCachedWrite: relayCachedWrite,
    operatorToken: secrets.operatorToken,
    identityKeys: secrets.identityKeys,
    baseUrl: config.baseUrl,
    logger,
    webhooks: { allowCidrs: config.webhookAllowCidrs, leaseMs: config.webhookLeaseMs },
  });
  forgetCachedReads = () => daemon.forgetCachedReads();
  const server = await listenDaemon(daemon, {
    host: config.grpcHost,
    port: config.grpcPort,
    logger,
    drainTimeoutMs: config.drainTimeoutMs,
  }).catch((error: unknown) => {
    throw listenFailure(error, { host: "CONSENT_GRPC_HOST", port: "CONSENT_GRPC_PORT" });
  });
  const stopPurge = schedulePurge(store, systemClock, logger);
  let gateway: { close(): Promise<unknown>; url: string } | undefined;
  if (options.withGateway) {
    const { startGateway } = await import("#gateway/main.js");
    const transport = createInProcessTransport({
      routes: daemon.routes,
      interceptors: daemon.interceptors,
    });
    gateway = await startGateway({
      config,
      transport,
      operatorToken: secrets.operatorToken,
      logger: loggers.gateway,
      onPublicChange: workerPublicChanges(daemon),
      inProcess: true,
      portSharedWith: config.httpPort === config.grpcPort ? "CONSENT_GRPC_PORT" : undefined,
    });
  }
  if (options.welcome !== false) {
    // Once per service (with the welcome): files other users may read or write.
    const exposed = await exposedFiles(config.dataDir);
    if (exposed) {
      logger.warn(
        `${exposed}, which hold the operator token, the identity key and the records (webhook secrets included): make them the owner's alone, e.g. chmod go-rwx on each`,
      );
    }
    for (const warning of store.startWarnings) logger.warn(warning);
    await warnOfForeignIdentityKeys(store, secrets.identityKeys, logger);
    if (secrets.identityKeys.length > 1) await resealForRotation(daemon, logger);
    await warnOfClockBehindStore(store, systemClock, logger);
    printWelcome(config, {
      storeKind: store.kind,
      daemonUrl: server.url,
      gatewayUrl: gateway?.url,
      created: options.welcome?.created ?? secrets.created,
      outlook: await storeOutlook(store, logger),
    });
  }

  stop.started(async () => {
    stopPurge();
    // The gateway reaches the daemon in memory, not through its port, so the two drain side by
    // side and the process stops within one CONSENT_DRAIN_TIMEOUT_MS; the store closes once both
    // are done.
    const drained = await Promise.allSettled([gateway?.close(), server.app.close()]);
    await store.close();
    for (const outcome of drained) {
      if (outcome.status === "rejected") throw outcome.reason;
    }
  });
}

/**
 * Subject states are found only under the identity key that made them (README, "Privacy"). A store
 * holding states of which none is under this daemon's keys was most likely given another key
 * (CONSENT_IDENTITY_KEY set to a new value instead of a new value first and the old one after):
 * every stored subject then reads as absent and writes start over. Said once at start-up; it is
 * also what a store says whose only key was dropped before all its records had been purged.
 */
async function warnOfForeignIdentityKeys(
  store: Store,
  keys: readonly IdentityKey[],
  logger: Logger,
): Promise<void> {
  if (keys.length === 0) return;
  // Asked key by key: the answers say both whether any is in use and, during a rotation
  // (README, "Privacy"), which older key still holds states.
  let inUse: { any: boolean; underKeys: boolean }[];
  try {
    inUse = await Promise.all(keys.map((key) => store.subjects.keysInUse([key.id])));
  } catch (err) {
    // The service already serves: a store that cannot answer now says so on its requests.
    logger.warn({ err }, "could not check which identity keys the stored subject states use");
    return;
  }
  if (!inUse[0]?.any) return;
  if (inUse.some((answer) => answer.underKeys)) {
    keys.forEach(({ id }, index) => {
      if (index > 0) reportOlderIdentityKey(id, inUse[index]?.underKeys ?? false, logger);
    });
    return;
  }
  logger.error(
    "no stored subject state was made under this daemon's identity keys (CONSENT_IDENTITY_KEY, else <data dir>/identity-key): every stored subject reads as absent, and writes start new records. If the key was replaced, list the key the states were made with after the new one (comma-separated); if an old key was dropped after its states expired, this stops once they are purged",
  );
}

/**
 * During a rotation, whether an older identity key still holds stored subject states: the
 * operator drops a key once it holds none, every record under it having been written again
 * (which moves it under the current key) or purged.
 */
function reportOlderIdentityKey(id: string, holdsStates: boolean, logger: Logger): void {
  logger.info(
    { identityKeyId: id },
    holdsStates
      ? "an older identity key still holds stored subject states: keep it listed in CONSENT_IDENTITY_KEY until each has been written again (which moves it under the current key) or has expired"
      : "an older identity key holds no stored subject state any more: drop it from CONSENT_IDENTITY_KEY once webhook signing secrets are all sealed under the current key (said next)",
  );
}

/**
 * During an identity-key rotation, the stored webhook signing secrets that open only under an
 * older key are sealed anew under the current one (the secrets stay the same), and the log says
 * whether any still needs an older key. Once per service, at start-up.
 */
async function resealForRotation(daemon: Daemon, logger: Logger): Promise<void> {
  let outcome: ResealOutcome;
  try {
    outcome = await daemon.resealWebhookSecrets();
  } catch (err) {
    logger.warn(
      { err },
      "could not seal the stored webhook signing secrets anew under the current identity key: keep the older keys listed in CONSENT_IDENTITY_KEY; the next start-up tries again",
    );
    return;
  }
  const { resealed, unopenable, contended } = outcome;
  if (contended > 0) {
    logger.warn(
      { resealed, contended },
      "some webhook signing secrets are still sealed under an older identity key (their endpoints changed while they were being sealed anew): keep the older keys listed in CONSENT_IDENTITY_KEY; the next start-up seals them anew",
    );
  } else {
    logger.info(
      { resealed },
      "webhook signing secrets are all sealed under the current identity key (those sealed under an older one were sealed anew; each secret is unchanged): they need no older key",
    );
  }
  if (unopenable > 0) {
    logger.warn(
      { unopenable },
      "some webhook signing secrets open under no key in CONSENT_IDENTITY_KEY (sealed under a key already dropped, or altered in the store): their endpoints' deliveries fail until that key is listed again or their secrets are rotated (docs/webhooks.md)",
    );
  }
}
