#!/usr/bin/env node
// The REST gateway alone, reaching the daemon at CONSENT_DAEMON_URL.
import { run } from "./run-ts.js";

const { runStandaloneGateway } = await run("../gateway/main.ts");
await runStandaloneGateway();
