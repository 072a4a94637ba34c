import { spawn } from "node:child_process";
import path from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { RECORDS_DIRECTORY } from "#daemon/store/lmdb-files.js";
import { createDaemonTransport } from "#gateway/daemon-transport.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { operatorTokenOf, ROOT, startDaemon, useProgramRoot } from "#test/support/processes.js";

/** The daemon's drain limit here: longer than the gateway's grace without it (3 × 200 ms). */
const DRAIN_MS = 4_000;
/** How long another process holds the store's write lock once it has it. */
const HOLD_MS = 2_000;

/**
 * Another process on the data directory holding LMDB's write lock for HOLD_MS (README: the
 * daemon's writes wait their turn), so that a call's write is still in flight as the daemon drains.
 */
async function holdWriteLock(dataDir: string): Promise<void> {
  const script = `
    import { open } from "lmdb";
    const env = open({ path: ${JSON.stringify(path.join(dataDir, RECORDS_DIRECTORY))}, maxDbs: 32 });
    env.transactionSync(() => {
      process.stdout.write("held\\n");
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${HOLD_MS});
    });
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => chunk.includes("held") && resolve());
    child.once("exit", (code) => reject(new Error(`the lock holder exited (${code})`)));
  });
}

/**
 * The stand-alone gateway's transport to a consentd that is shutting down (GOAWAY) with a drain
 * limit longer than the transport's keep-alive grace: the calls in flight are answered as the
 * daemon answers them within its limit, and new calls fail at once (UNAVAILABLE, a 503).
 */
describe("a gateway's calls to a draining daemon", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-draining-");

  // Regression: a connection the daemon told to go away was given up 3 keep-alive timeouts (30 s
  // by default) after it began closing, whatever the daemon's CONSENT_DRAIN_TIMEOUT_MS, failing
  // with 503 a call the daemon was still to answer, and perhaps carry out.
  it("waits for a call in flight for as long as the daemon's drain limit, and fails new calls at once", async () => {
    const dataDir = dirs.join("draining");
    const daemon = await startDaemon(dataDir, { CONSENT_DRAIN_TIMEOUT_MS: String(DRAIN_MS) });
    const auth = { headers: { authorization: `Bearer ${await operatorTokenOf(dataDir)}` } };
    const admin = createClient(
      AdminService,
      createDaemonTransport({
        baseUrl: daemon.url,
        keepAlive: { intervalMs: 50, timeoutMs: 200 },
        drainTimeoutMs: DRAIN_MS,
      }),
    );
    await admin.createTeam({ name: "before", plan: "free" }, auth);

    await holdWriteLock(dataDir);
    const inFlight = admin.createTeam({ name: "during the drain", plan: "free" }, auth);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const drainedAt = Date.now();
    const exited = daemon.program.stop("SIGTERM", DRAIN_MS + 5_000);
    // The daemon closes its port as the drain begins: a new call fails at once.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const refused = await admin.createTeam({ name: "after", plan: "free" }, auth).then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(refused?.code).toBe(Code.Unavailable);

    // The call in flight is answered once the lock is released, past the 600 ms grace.
    const { team } = await inFlight;
    expect(team?.name).toBe("during the drain");
    expect(Date.now() - drainedAt).toBeGreaterThan(1_000);
    expect(await exited).toBe(0);
  });
});
