import { once } from "node:events";
import { get } from "node:http";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { READ_CACHE_TTL_MS } from "#daemon/store/read-cache.js";
import { createBanner, createTeam, http, mintKey, operator } from "#test/support/api.js";
import {
  PROGRAMS,
  startProgram,
  startService,
  useProgramRoot,
  workerPids,
} from "#test/support/processes.js";
import { eventually } from "#test/support/webhook-receiver.js";

/** The loader's bound configuration revision, each call on a new connection (so on any worker). */
function loaderRevision(gatewayUrl: string, publicId: string) {
  return new Promise<number>((resolve, reject) => {
    const url = `${gatewayUrl}/loader/${publicId}.js`;
    get(url, { agent: false, headers: { "accept-encoding": "identity" } }, (response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        body += chunk;
      });
      response.on("end", () => {
        const config = JSON.parse(/\}\)\((\{.*\})\);\n$/s.exec(body)?.[1] ?? "null");
        resolve(config?.revision);
      });
    }).on("error", reject);
  });
}

/** The status of GET /api/v1/banners with a key, on a new connection (so on any worker). */
function bannerListStatus(gatewayUrl: string, key: string) {
  return new Promise<number | undefined>((resolve, reject) => {
    const headers = { authorization: `Bearer ${key}` };
    get(`${gatewayUrl}/api/v1/banners`, { agent: false, headers }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode));
    }).on("error", reject);
  });
}

const STUCK_IN_EXIT = fileURLToPath(
  new URL("../support/workers-stuck-in-exit.mjs", import.meta.url),
);

/** npm start with CONSENT_WORKERS=2: one service to clients, one loader truth after a publish. */
describe("npm start with two workers", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-workers-");
  /**
   * npm start with CONSENT_WORKERS=2 on a data dir of its own. Two workers print their URLs later
   * than one process, and later still on a two-core machine busy with the rest of the suite (15 s
   * was once not enough in CI).
   */
  const startTwoWorkers = (name: string, env: Record<string, string> = {}) =>
    startService(dirs.join(name), { CONSENT_WORKERS: "2", ...env }, { startupMs: 40_000 });

  it("serves a publish from every worker's loader at once", async () => {
    const { program, service } = await startTwoWorkers("data");
    const { key } = await mintKey(service, await createTeam(service, "business"));
    const { id, publicId } = await createBanner(service, key);
    // The edit first: only the publish below is left for a worker to learn from another.
    const patched = await http(service, "PATCH", `/api/v1/banners/${id}`, {
      key,
      body: { configuration: { position: "top" } },
    });
    expect(patched.status).toBe(200);
    // Twenty new connections: the primary hands them to both workers, which cache revision 1.
    const revisions = () =>
      Promise.all(Array.from({ length: 20 }, () => loaderRevision(service.gatewayUrl, publicId)));
    expect(new Set(await revisions())).toEqual(new Set([1]));

    const published = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
    expect(published.status).toBe(200);
    // The relay is a message between processes: allow it a moment, well inside the loaders' 30 s
    // bound, which would otherwise be what refreshes the other worker.
    await eventually(
      async () => ((await revisions()).every((revision) => revision === 2) ? true : undefined),
      "every worker's loader serves revision 2",
      10_000,
    );
    expect(await program.stop()).toBe(0);
  });

  it("refuses a key revoked through one worker on every worker at once, not after the key cache's second", async () => {
    const { program, service } = await startTwoWorkers("revoke");
    const teamId = await createTeam(service, "business");
    const { key, id } = await mintKey(service, teamId);
    // Each call on a new connection, so both workers serve some and cache the key.
    // One after another: the primary hands new connections to the workers in turn.
    const statuses = async (count: number) => {
      const seen = [];
      for (let i = 0; i < count; i++) seen.push(await bannerListStatus(service.gatewayUrl, key));
      return seen;
    };
    expect(new Set(await statuses(20))).toEqual(new Set([200]));
    const { admin, auth } = operator(service);
    await admin.revokeApiKey({ id }, auth);
    // Within the cache's second: only the relayed write can have told the other worker. Eight
    // calls, fewer than the failed attempts one client may make (429 from the eleventh).
    const started = performance.now();
    const after = await statuses(8);
    expect(performance.now() - started).toBeLessThan(READ_CACHE_TTL_MS);
    expect(new Set(after)).toEqual(new Set([401]));
    expect(await program.stop()).toBe(0);
  });

  it("kills a worker that stops answering, and stops the service with exit code 1", async () => {
    const { program, service } = await startTwoWorkers("stuck", {
      CONSENT_WORKER_TIMEOUT_MS: "3000",
      NODE_OPTIONS: `--import ${STUCK_IN_EXIT}`,
    });
    // Working workers are never taken for stuck ones: calls keep being answered past the timeout.
    const started = Date.now();
    while (Date.now() - started < 4_000) {
      expect((await http(service, "GET", "/api/v1/health")).status).toBe(200);
    }
    expect(program.child.exitCode).toBeNull();
    const workers = workerPids(program);
    expect(workers).toHaveLength(2);

    // One worker told to stop drains, then never finishes exiting: without the primary's
    // watchdog it would stay, holding the connections handed to it, and the service with it.
    process.kill(workers[0] as number, "SIGTERM");
    expect(await program.exitWithin(60_000)).toBe(1);
    // The other worker, told to drain in turn, is stuck in its exit too and is killed as well.
    for (const pid of workers) {
      expect(program.stderr()).toMatch(
        new RegExp(`worker ${pid} has not answered for \\d+ s; killing it and stopping`),
      );
    }
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
  });

  it("exits 1 when a worker does not drain cleanly after SIGTERM", async () => {
    const { program, service } = await startTwoWorkers("killed-in-drain");
    // Half-sent requests keep the workers draining for a while after SIGTERM.
    const { hostname, port } = new URL(service.gatewayUrl);
    const stalled = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const socket = connect({ host: hostname, port: Number(port) });
        socket.on("error", () => socket.destroy());
        await once(socket, "connect");
        socket.write("GET /api/v1/health HTTP/1.1\r\nHost: x\r\n");
        return socket;
      }),
    );
    try {
      const workers = workerPids(program);
      // The primary hands each accepted connection to a worker in turn: on a loaded machine that
      // can lag the client's connect, and a worker holding none of them yet drains at once.
      await new Promise((resolve) => setTimeout(resolve, 500));
      program.child.kill("SIGTERM");
      await new Promise((resolve) => setTimeout(resolve, 300));
      process.kill(workers[0] as number, "SIGKILL");
      // The other worker may finish its drain at once: its clients leave.
      for (const socket of stalled) socket.destroy();
      expect(await program.exitWithin(30_000)).toBe(1);
    } finally {
      for (const socket of stalled) socket.destroy();
    }
  });

  it("exits 0, saying nothing, when SIGTERM arrives while its workers are still starting", async () => {
    const program = startProgram(PROGRAMS.consent, {
      CONSENT_DATA_DIR: dirs.join("signalled-while-forking"),
      CONSENT_WORKERS: "2",
    });
    // The moment both workers exist: neither has loaded its code, let alone its signal handlers.
    const deadline = Date.now() + 30_000;
    while (workerPids(program).length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(workerPids(program)).toHaveLength(2);
    program.child.kill("SIGTERM");
    expect(await program.exitWithin(30_000)).toBe(0);
    expect(program.stderr()).toBe("");
  });

  it("does not take its workers for stuck after the primary itself was paused", async () => {
    const { program, service } = await startTwoWorkers("paused", {
      CONSENT_WORKER_TIMEOUT_MS: "2000",
    });
    // Both workers serve, and beat, while the primary is stopped for longer than the limit.
    process.kill(program.child.pid as number, "SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    process.kill(program.child.pid as number, "SIGCONT");
    const resumed = Date.now();
    while (Date.now() - resumed < 3_000) {
      expect((await http(service, "GET", "/api/v1/health")).status).toBe(200);
    }
    expect(program.stderr()).not.toContain("has not answered");
    expect(await program.stop()).toBe(0);
  });
});
