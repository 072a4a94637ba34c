#!/usr/bin/env node
// npm start: daemon and REST gateway in one process on the configured store.
import { main, run } from "./run-ts.js";

await main("consent", async () => {
  const { runDaemon } = await run("../daemon/main.ts");
  await runDaemon({ withGateway: true });
});
