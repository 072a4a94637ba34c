#!/usr/bin/env node
// npm start: daemon and REST gateway in one process, or in CONSENT_WORKERS such processes, on the
// configured store. Each worker runs this file too (node:cluster), and so starts from the bundle.
import { loadService, main } from "./run-ts.js";

await main("consent", async () => {
  const { startService } = await loadService();
  await startService();
});
