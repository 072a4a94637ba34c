// Preloaded into a consentctl process by a test (NODE_OPTIONS=--import): sends the process
// SIGINT, as Ctrl-C does, or the signal INTERRUPT_WHILE_LOADING_SIGNAL names (SIGHUP, as a
// terminal closing sends), at the moment bin/consentctl.js imports the CLI (its bundle, or its
// sources through tsx), that is after the launcher has started and before main() runs.
import { register } from "node:module";

const signal = process.env.INTERRUPT_WHILE_LOADING_SIGNAL ?? "SIGINT";
const hooks = `
const CLI = /\\/consent-service\\/consentctl-[0-9a-f]+\\/main\\.js$|\\/cli\\/main\\.tsx$/;
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (CLI.test(resolved.url)) process.kill(process.pid, ${JSON.stringify(signal)});
  return resolved;
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
