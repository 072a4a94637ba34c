#!/usr/bin/env node
// npm start: daemon and REST gateway in one process on the configured store.
import { run } from "./run-ts.js";

const { runDaemon } = await run("../daemon/main.ts");
await runDaemon({ withGateway: true });
