#!/usr/bin/env node
// consentctl: the operator CLI, started from its bundle (bin/bundle.js), or through tsx where no
// bundle can be kept.
import { load } from "./run-ts.js";

// Ctrl-C, SIGTERM or SIGHUP (its terminal closing) while the CLI loads (a fifth of a second; a
// second or more when the bundle is built) is held rather than left to end the process, and sent
// again once main() has started the command: a `logs tail` then ends as it would at any later
// moment (exit 0), a `logs export` fails (exit 1), and any other command ends by the signal, as
// it would have.
const HELD_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"];
const held = [];
const hold = (signal) => held.push(signal);
for (const signal of HELD_SIGNALS) process.on(signal, hold);
const commandStarted = () => {
  for (const signal of HELD_SIGNALS) process.off(signal, hold);
  if (held.length > 0) process.kill(process.pid, held[0]);
};

// --debug prints stacks: through the source map they name the TypeScript sources.
if (process.argv.includes("--debug")) process.setSourceMapsEnabled(true);
const { main } = await load("cli/main.tsx", "consentctl");
await main(process.argv, undefined, { commandStarted });
