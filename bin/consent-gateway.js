#!/usr/bin/env node
// The REST gateway alone, reaching the daemon at CONSENT_DAEMON_URL.
import { load, main } from "./run-ts.js";

await main("consent-gateway", async () => {
  const { startStandaloneGateway } = await load("daemon/programs.ts", "service");
  await startStandaloneGateway();
});
