import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import {
  DAEMON_URL,
  endpoints,
  GATEWAY_URL,
  operatorTokenOf,
  PROGRAMS,
  STANDALONE_GATEWAY_URL,
  startProgram,
  useProgramRoot,
  workerPids,
} from "#test/support/processes.js";
import { copyPrograms } from "#test/support/program-copy.js";

/**
 * npm start, consentd and the gateway alone start from one esbuild bundle of the service
 * (bin/bundle.js, daemon/programs.ts), as consentctl does from its own, and through tsx where no
 * bundle can be kept. Each case runs a copy of the programs whose cache starts empty.
 */
describe("the service's programs and their bundle", { timeout: 180_000 }, () => {
  const dirs = useProgramRoot("consent-service-bundle-");

  /** A copy of the programs (copyPrograms) in `dirs.join(name)`, its root. */
  async function programCopy(name: string, options: { unwritableCache?: boolean } = {}) {
    const root = dirs.join(name);
    return { root, ...(await copyPrograms(root, options)) };
  }

  const filesIn = async (dir: string) =>
    (await readdir(dir, { recursive: true, withFileTypes: true })).filter((entry) =>
      entry.isFile(),
    );

  it("two consentd started together on one data dir build one bundle between them; the gateway alone and npm start with two workers start from it, building nothing, and nothing runs through tsx", async () => {
    const { root, cache, tmp } = await programCopy("bundled");
    const dataDir = dirs.join("shared-data");
    const daemons = [1, 2].map(() =>
      startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dataDir, TMPDIR: tmp }, { root }),
    );
    const [daemonUrl] = await Promise.all(
      daemons.map((daemon) => daemon.waitFor(DAEMON_URL, 90_000)),
    );
    // One bundle, whole, and no draft a build left behind.
    const entries = (await readdir(cache)).sort();
    expect(entries).toEqual([
      expect.stringMatching(/^service-[0-9a-f]{24}$/),
      "service.inputs.json",
    ]);
    const bundle = path.join(cache, entries[0] as string);
    expect(await readdir(bundle)).toEqual(expect.arrayContaining(["main.js", "main.js.map"]));
    const manifest = await stat(path.join(cache, "service.inputs.json"));

    const gateway = startProgram(
      PROGRAMS.gateway,
      { CONSENT_DATA_DIR: dataDir, CONSENT_DAEMON_URL: daemonUrl as string, TMPDIR: tmp },
      { root },
    );
    const split = endpoints({
      daemonUrl: daemonUrl as string,
      gatewayUrl: await gateway.waitFor(STANDALONE_GATEWAY_URL),
      operatorToken: "",
    });
    expect((await http(split, "GET", "/api/v1/health")).status).toBe(200);

    const workersDataDir = dirs.join("workers-data");
    const service = startProgram(
      PROGRAMS.consent,
      { CONSENT_DATA_DIR: workersDataDir, CONSENT_WORKERS: "2", TMPDIR: tmp },
      { root },
    );
    const gatewayUrl = await service.waitFor(GATEWAY_URL, 90_000);
    const operatorToken = await operatorTokenOf(workersDataDir);
    const running = endpoints({
      gatewayUrl,
      daemonUrl: await service.waitFor(DAEMON_URL),
      operatorToken,
    });
    expect(workerPids(service)).toHaveLength(2);
    // The banner runtime, which the gateway builds from gateway/runtime/ with esbuild as it
    // serves the first loader, is found from the bundle as from the sources.
    const { key } = await mintKey(running, await createTeam(running));
    const { publicId } = await createBanner(running, key);
    const loader = await http(running, "GET", `/loader/${publicId}.js`);
    expect(loader.status).toBe(200);
    expect(loader.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    // The runtime draws the banner in a shadow root; its configuration names the banner.
    expect(loader.text).toContain("attachShadow");
    expect(loader.text).toContain(`"id":"${publicId}"`);

    // Nothing was built again (the same bundle, its list of inputs untouched), and tsx, which
    // caches each source it compiles in TMPDIR, compiled none.
    expect((await readdir(cache)).sort()).toEqual(entries);
    expect(await stat(path.join(cache, "service.inputs.json"))).toMatchObject({
      ino: manifest.ino,
      mtimeMs: manifest.mtimeMs,
    });
    expect(await filesIn(tmp)).toEqual([]);

    for (const program of [service, gateway, ...daemons]) expect(await program.stop()).toBe(0);
  });

  it("npm start runs its sources through tsx, and serves, where no bundle can be kept (a read-only installation)", async () => {
    const { root, cache, tmp } = await programCopy("read-only", { unwritableCache: true });
    const dataDir = dirs.join("read-only-data");
    const service = startProgram(
      PROGRAMS.consent,
      { CONSENT_DATA_DIR: dataDir, TMPDIR: tmp },
      {
        root,
      },
    );
    const running = endpoints({
      gatewayUrl: await service.waitFor(GATEWAY_URL, 90_000),
      daemonUrl: await service.waitFor(DAEMON_URL),
      operatorToken: "",
    });
    expect((await http(running, "GET", "/api/v1/health")).status).toBe(200);
    expect((await stat(cache)).isFile()).toBe(true);
    expect((await filesIn(tmp)).length).toBeGreaterThan(0);
    expect(await service.stop()).toBe(0);
  });
});
