/**
 * The service's programs, which their bins start (bin/consent.js, bin/consentd.js,
 * bin/consent-gateway.js): one entry point, so one bundle (bin/bundle.js) serves all three and
 * one build follows a change. Each imports its own part when it starts, so the bundle is split
 * there and consentd never evaluates the gateway, nor the gateway the store.
 */

/** `npm start`: daemon and gateway in one process, or in CONSENT_WORKERS such processes. */
export async function startService(): Promise<void> {
  const { runService } = await import("#daemon/workers.js");
  await runService();
}

/** consentd: the Connect/gRPC daemon alone. */
export async function startDaemon(): Promise<void> {
  const { runDaemon } = await import("#daemon/main.js");
  await runDaemon({ withGateway: false });
}

/** consent-gateway: the REST gateway alone, reaching the daemon at CONSENT_DAEMON_URL. */
export async function startStandaloneGateway(): Promise<void> {
  const { runStandaloneGateway } = await import("#gateway/main.js");
  await runStandaloneGateway();
}
