#!/usr/bin/env node
// The REST gateway alone, reaching the daemon at CONSENT_DAEMON_URL.
import { loadService, main } from "./run-ts.js";

await main("consent-gateway", async () => {
  const { startStandaloneGateway } = await loadService();
  await startStandaloneGateway();
});
