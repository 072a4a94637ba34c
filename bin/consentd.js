#!/usr/bin/env node
// consentd: the Connect/gRPC daemon alone.
import { run } from "./run-ts.js";

const { runDaemon } = await run("../daemon/main.ts");
await runDaemon({ withGateway: false });
