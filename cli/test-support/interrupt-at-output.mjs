// Preloaded into a consentctl process by a test (NODE_OPTIONS=--import): sends the process
// SIGINT, as Ctrl-C does, or the signal INTERRUPT_AT_OUTPUT_SIGNAL names, as it first writes to
// stdout, that is while it writes its result (Ink's final frame, drawn in one synchronous
// render), before the write itself.
const signal = process.env.INTERRUPT_AT_OUTPUT_SIGNAL ?? "SIGINT";
const write = process.stdout.write.bind(process.stdout);
let sent = false;
process.stdout.write = (...args) => {
  if (!sent) {
    sent = true;
    process.kill(process.pid, signal);
  }
  return write(...args);
};
