#!/usr/bin/env node
// consentd: the Connect/gRPC daemon alone.
import { main, run } from "./run-ts.js";

await main("consentd", async () => {
  const { runDaemon } = await run("../daemon/main.ts");
  await runDaemon({ withGateway: false });
});
