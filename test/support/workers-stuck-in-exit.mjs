// Preloaded into a test service's processes (NODE_OPTIONS=--import): each worker of `npm start`
// blocks for good once it starts to exit, as a worker whose exit waits on a thread that never
// ends. Its event loop no longer runs, yet the process stays.
import cluster from "node:cluster";

if (cluster.isWorker) {
  process.on("exit", () => {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  });
}
