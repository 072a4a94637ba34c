#!/usr/bin/env node
// The REST gateway alone, reaching the daemon at CONSENT_DAEMON_URL.
import { main, run } from "./run-ts.js";

await main("consent-gateway", async () => {
  const { runStandaloneGateway } = await run("../gateway/main.ts");
  await runStandaloneGateway();
});
