#!/usr/bin/env node
// npm start: daemon and REST gateway in one process, or in CONSENT_WORKERS such processes, on the
// configured store.
import { main, run } from "./run-ts.js";

await main("consent", async () => {
  const { runService } = await run("../daemon/workers.ts");
  await runService();
});
