import { readdir, readFile, stat } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  childPids,
  freePort,
  PROGRAMS,
  type Program,
  startProgram,
  startService,
  useProgramRoot,
} from "#test/support/processes.js";
import { copyPrograms } from "#test/support/program-copy.js";

/**
 * A stop signal while the service is still starting ends it once it can, with exit code 0: at
 * once while it loads its code (nothing is open then), after a drain of what it opened since.
 */
describe("SIGTERM during start-up", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-shutdown-starting-");

  /**
   * Each program of `dirs.join(name)` (copyPrograms), started and sent SIGTERM once `loading`
   * says it is loading its code, exits 0 at once, having written nothing.
   */
  async function signalledWhileLoading(
    name: string,
    { unwritableCache }: { unwritableCache: boolean },
    loading: (program: Program, tmp: string) => Promise<boolean>,
  ) {
    for (const bin of [PROGRAMS.consent, PROGRAMS.consentd, PROGRAMS.gateway]) {
      // A copy of its own for each: with an empty cache, each builds the bundle anew.
      const root = dirs.join(`${name}-${path.basename(bin)}`);
      const { tmp } = await copyPrograms(root, { unwritableCache });
      const dataDir = path.join(root, "data");
      const program = startProgram(
        bin,
        {
          TMPDIR: tmp,
          CONSENT_DATA_DIR: dataDir,
          CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
          CONSENT_DAEMON_URL: "http://127.0.0.1:9",
        },
        { root },
      );
      await until(() => loading(program, tmp));
      program.child.kill("SIGTERM");
      expect([bin, await program.exitWithin(10_000)]).toEqual([bin, 0]);
      expect(program.stderr()).toBe("");
      await expect(stat(dataDir)).rejects.toThrow(/ENOENT/);
    }
  }

  it("npm start, consentd and the gateway alone exit 0 while they build their bundle, having written nothing", async () => {
    // esbuild runs as a child process of the program while it builds.
    await signalledWhileLoading("building", { unwritableCache: false }, async (program) =>
      (await childCommands(program)).some((command) => command.includes("esbuild")),
    );
  });

  it("npm start, consentd and the gateway alone exit 0 while tsx compiles their sources (no bundle can be kept), having written nothing", async () => {
    // An empty TMPDIR: tsx compiles each source anew and caches it there, so the first file
    // there says the program runs and is loading its code.
    await signalledWhileLoading("compiling", { unwritableCache: true }, async (_, tmp) => {
      const entries = await readdir(tmp, { recursive: true, withFileTypes: true });
      return entries.some((entry) => entry.isFile());
    });
  });

  it("npm start exits 0 when signalled as it writes its secrets, opens its store, binds the daemon's port and then the gateway's, leaving both ports free and a data dir that serves on the next start", async () => {
    const points: [string, (dataDir: string, program: Program) => Promise<boolean>][] = [
      ["secrets written", (dataDir) => exists(path.join(dataDir, "admin-token"))],
      ["store opening", (dataDir) => exists(path.join(dataDir, "records", "data.mdb"))],
      [
        "daemon listening",
        async (_, program) => /"service":"consentd".*listening/.test(program.stdout()),
      ],
      [
        "gateway listening",
        async (_, program) => /"service":"consent-gateway".*listening/.test(program.stdout()),
      ],
    ];
    for (const [point, reached] of points) {
      const dataDir = dirs.join(point.replaceAll(" ", "-"));
      const ports = [await freePort(), await freePort()];
      const program = startProgram(PROGRAMS.consent, {
        CONSENT_DATA_DIR: dataDir,
        CONSENT_LOG_LEVEL: "info",
        CONSENT_HTTP_PORT: String(ports[0]),
        CONSENT_GRPC_PORT: String(ports[1]),
      });
      await until(() => reached(dataDir, program));
      program.child.kill("SIGTERM");
      expect([point, await program.exitWithin(15_000)]).toEqual([point, 0]);
      expect([point, program.stderr()]).toEqual([point, ""]);
      for (const port of ports)
        expect([point, port, await portFree(port)]).toEqual([point, port, true]);

      const next = await startService(dataDir);
      expect([point, (await fetch(`${next.service.gatewayUrl}/api/v1/health`)).status]).toEqual([
        point,
        200,
      ]);
      expect(await next.program.stop()).toBe(0);
    }
  });
});

/** The command lines of the processes `program` has started and which still run (childPids). */
function childCommands(program: Program): Promise<string[]> {
  return Promise.all(
    childPids(program).map((child) => readFile(`/proc/${child}/cmdline`, "utf8").catch(() => "")),
  );
}

/** Resolves once `check` holds, polled every few milliseconds so a short moment is not missed. */
async function until(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

/** Whether nothing listens on `port` of 127.0.0.1: a server can bind it. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}
