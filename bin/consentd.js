#!/usr/bin/env node
// consentd: the Connect/gRPC daemon alone.
import { loadService, main } from "./run-ts.js";

await main("consentd", async () => {
  const { startDaemon } = await loadService();
  await startDaemon();
});
