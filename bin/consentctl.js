#!/usr/bin/env node
// consentctl: the operator CLI.
import { run } from "./run-ts.js";

const { main } = await run("../cli/main.tsx");
await main(process.argv);
