#!/usr/bin/env node
// consentd: the Connect/gRPC daemon alone.
import { load, main } from "./run-ts.js";

await main("consentd", async () => {
  const { startDaemon } = await load("daemon/programs.ts", "service");
  await startDaemon();
});
