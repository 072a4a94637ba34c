import { spawnSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { once } from "node:events";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { parseIdentityKeys } from "#daemon/identity/subject-identity.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import {
  DAEMON_URL,
  endpoints,
  freePort,
  GATEWAY_URL,
  logLines,
  operatorTokenOf,
  PROGRAMS,
  type Program,
  ROOT,
  STANDALONE_GATEWAY_URL,
  startPrinted,
  startProgram,
  startService,
  stopAllPrograms,
  storeWithSubjectState,
} from "#test/support/processes.js";

/**
 * decisions §1: what a newcomer sees on `npm start`, and a misconfigured gateway. Each test starts
 * real programs, each start some 2 s of CPU loading its code: on two cores shared with another
 * test file and other load, a start took 8-10 s, and a test of three past 30 s. The limit is the
 * other program files' (workers.test.ts, store-failure.test.ts).
 */
describe("start-up of the real programs", { timeout: 120_000 }, () => {
  let root: string;

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "consent-startup-"));
  });
  afterEach(() => stopAllPrograms());
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("npm start on an empty data dir creates it and its secrets, prints the URLs and how to mint a key, and is healthy", async () => {
    // Run where a newcomer runs it: the default data dir, ./data where it started.
    const dataDir = path.join(root, "first", "data");
    await mkdir(path.dirname(dataDir));
    const program = startProgram(PROGRAMS.consent, {}, { cwd: path.dirname(dataDir) });
    const gatewayUrl = await program.waitFor(GATEWAY_URL);
    const daemonUrl = await program.waitFor(DAEMON_URL);

    expect(gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(daemonUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(gatewayUrl).not.toBe(daemonUrl);
    const out = program.stdout();
    expect(out).toContain(`embedded store (${dataDir})`);
    expect(out).toMatch(/First start: created .*admin-token.*identity-key/);
    // The commands as printed reach this process from any directory, without npm: its data dir
    // (the CLI's default is ./data where it runs) and port (not the default) are filled in.
    const cli = `CONSENT_DATA_DIR=${dataDir} CONSENT_DAEMON_URL=${daemonUrl} node ${path.join(ROOT, "bin/consentctl.js")}`;
    expect(out).toContain(`${cli} teams create`);
    expect(out).toContain(`${cli} keys create --team <team id> --env live --scopes`);
    expect(out).not.toContain("npx");
    const teamsCreate = out.match(/^ {2}(.* teams create .*)$/m)?.[1] ?? "";
    const pasted = spawnSync("sh", ["-c", `${teamsCreate} --json`], {
      cwd: root,
      env: { PATH: process.env.PATH },
      encoding: "utf8",
    });
    expect([pasted.status, pasted.stderr]).toEqual([0, ""]);
    expect(JSON.parse(pasted.stdout)).toMatchObject({ name: "My team", plan: "professional" });
    // Port 0 here: the default public base URL (port 8080) is not where the gateway listens.
    expect(out).toContain("Public base URL        http://localhost:8080");
    expect(out).toContain("set CONSENT_BASE_URL");

    expect((await stat(dataDir)).isDirectory()).toBe(true);
    const token = await stat(path.join(dataDir, "admin-token"));
    expect(token.mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dataDir, "identity-key"))).mode & 0o777).toBe(0o600);
    const identityKey = (await readFile(path.join(dataDir, "identity-key"), "utf8")).trim();
    expect(Buffer.from(identityKey, "base64")).toHaveLength(32);

    const health = await fetch(`${gatewayUrl}/api/v1/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ data: { status: "ok" }, version: "v1" });
    expect(program.stderr()).toBe("");
  });

  it("npm start given CONSENT_ADMIN_TOKEN says consentctl needs it, never prints it, and its commands work with it set", async () => {
    const token = "operator-token-set-by-the-operator-0123456789";
    const program = startProgram(PROGRAMS.consent, {
      CONSENT_DATA_DIR: path.join(root, "own-token"),
      CONSENT_ADMIN_TOKEN: token,
    });
    await program.waitFor(GATEWAY_URL);
    const out = program.stdout();
    expect(out).not.toContain(token);
    expect(out).toContain(
      "  (consentctl sends the operator token from CONSENT_ADMIN_TOKEN: set it to this service's\n  value in the shell that runs these)",
    );
    const teamsCreate = out.match(/^ {2}(.* teams create .*)$/m)?.[1] ?? "";
    const pasted = spawnSync("sh", ["-c", `${teamsCreate} --json`], {
      cwd: root,
      env: { PATH: process.env.PATH, CONSENT_ADMIN_TOKEN: token },
      encoding: "utf8",
    });
    expect([pasted.status, pasted.stderr]).toEqual([0, ""]);
    expect(JSON.parse(pasted.stdout)).toMatchObject({ name: "My team" });
  });

  /**
   * consentd alone on `env`, and the gateway command its message prints, pasted as printed: the
   * command, the gateway's URL, and the loader URL of a banner created through that gateway, which
   * that gateway must answer with the loader.
   */
  async function pastedGateway(name: string, env: Record<string, string>) {
    const dataDir = path.join(root, name);
    const daemon = startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dataDir, ...env });
    const daemonUrl = await daemon.waitFor(DAEMON_URL);
    const command = daemon.stdout().match(/not in this process; start one: (.*)$/m)?.[1] ?? "";
    // Where the loader tags point: nothing to warn of.
    expect(daemon.stdout()).not.toContain("The gateway listens on");
    const gateway = startPrinted(command, root);
    const gatewayUrl = await gateway.waitFor(STANDALONE_GATEWAY_URL);
    const service = endpoints({
      daemonUrl,
      gatewayUrl,
      operatorToken: await operatorTokenOf(dataDir),
    });
    const { key } = await mintKey(service, await createTeam(service));
    const { id } = await createBanner(service, key);
    // The loader URL the daemon gives (consentctl banners show prints it in the site's tag): the
    // pasted gateway must answer there with the loader.
    const banners = createClient(BannerService, createGrpcTransport({ baseUrl: daemonUrl }));
    const { banner } = await banners.getBanner(
      { id },
      { headers: { authorization: `Bearer ${key}` } },
    );
    const loaderUrl = banner?.loaderUrl ?? "";
    const loader = await fetch(loaderUrl);
    expect([loader.status, loader.headers.get("content-type")]).toEqual([
      200,
      expect.stringContaining("javascript"),
    ]);
    expect(await gateway.stop()).toBe(0);
    expect(await daemon.stop()).toBe(0);
    return { command, gatewayUrl, loaderUrl: new URL(loaderUrl) };
  }

  it("consentd alone prints a gateway command that listens where its loader tags point: on the REST port and host it was given, else on a local CONSENT_BASE_URL's", async () => {
    const restPort = await freePort();
    const given = await pastedGateway("split-rest-port", {
      CONSENT_HTTP_PORT: String(restPort),
      CONSENT_BASE_URL: `http://127.0.0.1:${restPort}`,
    });
    expect(given.command).toContain(`CONSENT_HTTP_PORT=${restPort} node `);
    expect(given.gatewayUrl).toBe(`http://127.0.0.1:${restPort}`);
    expect(given.loaderUrl.port).toBe(String(restPort));

    // The harness's CONSENT_HTTP_PORT=0 unset: the base URL alone says where visitors go.
    const basePort = await freePort();
    const local = await pastedGateway("split-base-port", {
      CONSENT_HTTP_PORT: "",
      CONSENT_BASE_URL: `http://localhost:${basePort}`,
    });
    expect(local.command).toContain(`CONSENT_HTTP_PORT=${basePort} node `);
    expect(local.gatewayUrl).toBe(`http://127.0.0.1:${basePort}`);
    expect(local.loaderUrl.href).toMatch(new RegExp(`^http://localhost:${basePort}/loader/`));

    const ipv6Port = await freePort();
    const ipv6 = await pastedGateway("split-base-ipv6", {
      CONSENT_HTTP_PORT: "",
      CONSENT_BASE_URL: `http://[::1]:${ipv6Port}`,
    });
    expect(ipv6.command).toContain(`CONSENT_HTTP_HOST=::1 CONSENT_HTTP_PORT=${ipv6Port} node `);
    expect(ipv6.gatewayUrl).toBe(`http://[::1]:${ipv6Port}`);
    expect(ipv6.loaderUrl.host).toBe(`[::1]:${ipv6Port}`);
  });

  /** What consentd alone on `env` prints at start-up, and its gateway command. */
  async function consentdSays(name: string, env: Record<string, string>) {
    const daemon = startProgram(PROGRAMS.consentd, {
      CONSENT_DATA_DIR: path.join(root, name),
      ...env,
    });
    await daemon.waitFor(DAEMON_URL);
    expect(await daemon.stop()).toBe(0);
    const out = daemon.stdout();
    return { out, command: out.match(/not in this process; start one: (.*)$/m)?.[1] ?? "" };
  }

  it("consentd alone leaves the port out of the gateway command when CONSENT_BASE_URL names another host, unless it was given one", async () => {
    const printed = async (name: string, env: Record<string, string>) =>
      (await consentdSays(name, { CONSENT_BASE_URL: "https://consent.example.com", ...env }))
        .command;
    const proxied = await printed("split-proxied", { CONSENT_HTTP_PORT: "" });
    expect(proxied).toMatch(/^CONSENT_DATA_DIR=\S+ CONSENT_DAEMON_URL=\S+ node \S+$/);
    const restPort = await freePort();
    expect(await printed("split-proxied-port", { CONSENT_HTTP_PORT: String(restPort) })).toContain(
      `CONSENT_HTTP_PORT=${restPort} node `,
    );
  });

  it("consentd alone with CONSENT_BASE_URL=http://localhost prints the gateway command on port 80 with what listening there needs", async () => {
    const { out, command } = await consentdSays("split-port-80", {
      CONSENT_HTTP_PORT: "",
      CONSENT_BASE_URL: "http://localhost",
    });
    expect(command).toContain("CONSENT_HTTP_PORT=80 node ");
    expect(out).toContain(
      `start one: ${command}\n  Port 80 is below 1024: on Linux only root or a program with CAP_NET_BIND_SERVICE may listen\n  there. Else run that gateway on a higher CONSENT_HTTP_PORT behind a proxy on port 80.\n`,
    );
    // A port any program may open: no such note.
    const basePort = await freePort();
    const high = await consentdSays("split-port-high", {
      CONSENT_HTTP_PORT: "",
      CONSENT_BASE_URL: `http://localhost:${basePort}`,
    });
    expect(high.command).toContain(`CONSENT_HTTP_PORT=${basePort} node `);
    expect(high.out).not.toContain("CAP_NET_BIND_SERVICE");
  });

  // Regression: consentd alone, given a REST port, printed its gateway command on that port with
  // no word that the loader tags and preference links it builds point at another port.
  it("consentd alone and npm start say when the gateway listens on another port than a CONSENT_BASE_URL of this machine names, and not for one elsewhere", async () => {
    const [restPort, basePort] = [await freePort(), await freePort()];
    const warning = `  The gateway listens on port ${restPort}, CONSENT_BASE_URL names port ${basePort} of this machine: loader tags and\n  preference links reach it only through a proxy on port ${basePort}; else set CONSENT_HTTP_PORT=${basePort}.\n`;
    const split = await consentdSays("split-other-port", {
      CONSENT_HTTP_PORT: String(restPort),
      CONSENT_BASE_URL: `http://127.0.0.1:${basePort}`,
    });
    expect(split.command).toContain(`CONSENT_HTTP_PORT=${restPort} node `);
    expect(split.out).toContain(`start one: ${split.command}\n${warning}`);

    // CONSENT_BASE_URL unset: its default (port 8080) wants setting, as npm start says.
    const unset = await consentdSays("split-default-base", { CONSENT_HTTP_PORT: String(restPort) });
    expect(unset.out).toContain(
      "  The gateway listens on another port than the public base URL names: set CONSENT_BASE_URL",
    );

    // A proxy's address (another host) stands: its port may be mapped.
    const proxied = await consentdSays("split-other-host", {
      CONSENT_HTTP_PORT: String(restPort),
      CONSENT_BASE_URL: `http://consent.example.com:${basePort}`,
    });
    expect(proxied.out).not.toContain("The gateway listens on");

    const together = startProgram(PROGRAMS.consent, {
      CONSENT_DATA_DIR: path.join(root, "together-other-port"),
      CONSENT_HTTP_PORT: String(restPort),
      CONSENT_BASE_URL: `http://localhost:${basePort}`,
    });
    expect(await together.waitFor(GATEWAY_URL)).toBe(`http://127.0.0.1:${restPort}`);
    expect(together.stdout()).toContain(
      `  Public base URL        http://localhost:${basePort}   (CONSENT_BASE_URL: loader tags, preference links)\n${warning}`,
    );
    expect(await together.stop()).toBe(0);
  });

  it("npm start keeps serving when the reader of its output goes away", async () => {
    const [httpPort, grpcPort] = [await freePort(), await freePort()];
    const program = startProgram(PROGRAMS.consent, {
      CONSENT_DATA_DIR: path.join(root, "no-reader"),
      CONSENT_HTTP_PORT: String(httpPort),
      CONSENT_GRPC_PORT: String(grpcPort),
    });
    // Gone before the start-up message is written (`npm start | head -1`, a log shipper restarting).
    program.child.stdout?.destroy();
    let health = 0;
    for (let tries = 0; tries < 200 && health !== 200; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      health = await fetch(`http://127.0.0.1:${httpPort}/api/v1/health`).then(
        (response) => response.status,
        () => 0,
      );
    }
    expect(health).toBe(200);
    expect(await program.stop()).toBe(0);
    expect(program.stderr()).toBe("");
  });

  it("npm start logs JSON lines with level, time, service and msg, tagging each with the daemon or the gateway, and never a client's IP, User-Agent or subject id", async () => {
    const startedAt = Date.now();
    const dataDir = path.join(root, "logs");
    const program = startProgram(PROGRAMS.consent, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_LOG_LEVEL: "debug",
      CONSENT_BASE_URL: "https://consent.example.com",
      // The client's address is the one a trusted proxy names, as behind a load balancer.
      CONSENT_TRUST_PROXY: "loopback",
    });
    const gatewayUrl = await program.waitFor(GATEWAY_URL);
    const daemonUrl = await program.waitFor(DAEMON_URL);
    const gatewayPort = new URL(gatewayUrl).port;
    const daemonPort = new URL(daemonUrl).port;
    // Each server's own "listening" line, whenever the logger has flushed it.
    const serviceAt = async (port: string) =>
      (
        JSON.parse(
          await program.waitFor(
            new RegExp(`^(\\{.*"msg":"Server listening at [^"]*:${port}"\\})$`, "m"),
          ),
        ) as { service: string }
      ).service;
    expect([await serviceAt(daemonPort), await serviceAt(gatewayPort)]).toEqual([
      "consentd",
      "consent-gateway",
    ]);
    // A base URL the operator set stands (a proxy may map its port): no warning.
    expect(program.stdout()).toContain("Public base URL        https://consent.example.com");
    expect(program.stdout()).not.toContain("set CONSENT_BASE_URL");

    // What a visitor's requests carry, written, read, and refused.
    const operatorToken = await operatorTokenOf(dataDir);
    const service = endpoints({ gatewayUrl, daemonUrl, operatorToken });
    const { key } = await mintKey(service, await createTeam(service));
    const { publicId } = await createBanner(service, key);
    const visitor = {
      "user-agent": "ProbeBrowser/7.3 (visitor-agent-4711)",
      "x-forwarded-for": "203.0.113.47",
    };
    const subject = { bannerId: publicId, subjectId: "visitor-subject-4711" };
    const put = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      headers: visitor,
      body: { ...subject, baseVersion: 0, consentState: consentState() },
    });
    expect(put.status).toBe(200);
    const refused = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: "cs_live_0000000000000000000000000000000000000000",
      headers: visitor,
      body: subject,
    });
    expect(refused.status).toBe(401);
    expect(await program.stop()).toBe(0);

    // The log (logLines); the rest of stdout is the start-up summary.
    const lines = logLines(program);
    expect(lines.map((line) => line.msg)).toContain("draining and shutting down");
    for (const line of lines) {
      expect(line).toMatchObject({
        level: expect.toBeOneOf([10, 20, 30, 40, 50, 60]),
        time: expect.any(Number),
        service: expect.toBeOneOf(["consentd", "consent-gateway"]),
        msg: expect.any(String),
      });
      expect(line.time as number).toBeGreaterThanOrEqual(startedAt);
      expect(line.time as number).toBeLessThanOrEqual(Date.now());
      if ("err" in line) {
        expect(line.err).toMatchObject({ type: expect.any(String), message: expect.any(String) });
      }
    }
    for (const secret of ["203.0.113.47", "visitor-agent-4711", "visitor-subject-4711"]) {
      expect([secret, program.stdout().includes(secret)]).toEqual([secret, false]);
    }
  });

  it("a second start on the same data dir keeps the admin token and identity key and says nothing of a first start", async () => {
    const dataDir = path.join(root, "second");
    const secrets = async () =>
      Promise.all(
        ["admin-token", "identity-key"].map((file) => readFile(path.join(dataDir, file), "utf8")),
      );
    const first = startProgram(PROGRAMS.consent, { CONSENT_DATA_DIR: dataDir });
    await first.waitFor(GATEWAY_URL);
    const before = await secrets();
    expect(await first.stop()).toBe(0);

    const second = startProgram(PROGRAMS.consent, { CONSENT_DATA_DIR: dataDir });
    const gatewayUrl = await second.waitFor(GATEWAY_URL);
    expect(await secrets()).toEqual(before);
    expect(second.stdout()).not.toContain("First start");
    expect(second.stdout()).toContain("bin/consentctl.js keys create");
    expect((await fetch(`${gatewayUrl}/api/v1/health`)).status).toBe(200);
  });

  it("a restart of a store holding API keys says how many teams it holds and how to list their keys, instead of how to mint one", async () => {
    const dataDir = path.join(root, "restart");
    const restart = async () => {
      const started = await startService(dataDir);
      return { ...started, out: started.program.stdout() };
    };
    const first = await restart();
    const teamId = await createTeam(first.service);
    expect(await first.program.stop()).toBe(0);

    // A team without a key: the service has no integrator yet.
    const keyless = await restart();
    expect(keyless.out).toContain("Mint an API key:");
    const { id: keyId } = await mintKey(keyless.service, teamId);
    expect(await keyless.program.stop()).toBe(0);

    const oneTeam = await restart();
    expect(oneTeam.out).not.toContain("Mint an API key");
    expect(oneTeam.out).not.toContain("keys create");
    expect(oneTeam.out).toContain("The store holds 1 team and API keys; list them with:");
    const cli = `CONSENT_DATA_DIR=${dataDir} CONSENT_DAEMON_URL=${oneTeam.service.daemonUrl} node ${path.join(ROOT, "bin/consentctl.js")}`;
    expect(oneTeam.out).toContain(`  ${cli} teams list\n`);
    // With one team, its id is filled in: the line pastes as it is.
    const keysList = oneTeam.out.match(/^ {2}(.* keys list .*)$/m)?.[1] ?? "";
    expect(keysList).toBe(`${cli} keys list --team ${teamId}`);
    const pasted = spawnSync("sh", ["-c", `${keysList} --json`], {
      cwd: root,
      env: { PATH: process.env.PATH },
      encoding: "utf8",
    });
    expect([pasted.status, pasted.stderr]).toEqual([0, ""]);
    expect(JSON.parse(pasted.stdout).keys).toMatchObject([{ id: keyId, teamId }]);
    await createTeam(oneTeam.service);
    expect(await oneTeam.program.stop()).toBe(0);

    const twoTeams = await restart();
    expect(twoTeams.out).toContain("The store holds 2 teams and API keys; list them with:");
    expect(twoTeams.out).toMatch(/^ {2}.* keys list --team <team id>$/m);
    expect(twoTeams.out).not.toContain("Mint an API key");
    expect(twoTeams.program.stderr()).toBe("");
  });

  it("a data dir whose identity key went missing gets no new key: its subjects answer 503 until the key is back", async () => {
    const dataDir = path.join(root, "lost-key");
    const keyFile = path.join(dataDir, "identity-key");
    const first = await startService(dataDir);
    const { key } = await mintKey(first.service, await createTeam(first.service, "business"));
    const { publicId } = await createBanner(first.service, key);
    const subject = { bannerId: publicId, subjectId: "user-1842" };
    const put = await http(first.service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...subject, baseVersion: 0, consentState: consentState() },
    });
    expect(put.status).toBe(200);
    expect(await first.program.stop()).toBe(0);
    const saved = await readFile(keyFile, "utf8");
    await rm(keyFile);

    const second = await startService(dataDir);
    const resolve = () =>
      http(second.service, "POST", "/api/v1/consent/subjects/resolve", { key, body: subject });
    const refused = await resolve();
    expect([refused.status, refused.body.data.code]).toEqual([503, "identity_unavailable"]);
    expect(second.program.stdout()).toContain(
      `${keyFile} is missing, but the data directory holds a store`,
    );
    expect(second.program.stdout()).not.toContain("First start");
    await expect(stat(keyFile)).rejects.toThrow(/ENOENT/);
    expect(await second.program.stop()).toBe(0);

    await writeFile(keyFile, saved, { mode: 0o600 });
    const third = await startService(dataDir);
    const found = await http(third.service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: subject,
    });
    expect([found.status, found.body.data.found, found.body.data.version]).toEqual([200, true, 1]);
    expect(await third.program.stop()).toBe(0);
  });

  it("says at start-up when no stored subject state was made under its identity keys, and during a rotation whether the older key still holds any", async () => {
    const dataDir = path.join(root, "other-key");
    const { key, publicId } = await storeWithSubjectState(dataDir);
    const stored = (await readFile(path.join(dataDir, "identity-key"), "utf8")).trim();
    const another = randomBytes(32).toString("base64");
    const warning = "no stored subject state was made under this daemon's identity keys";

    // A new key in place of the one the state was made with: said once, however many workers.
    const replaced = await startService(dataDir, {
      CONSENT_IDENTITY_KEY: another,
      CONSENT_WORKERS: "2",
    });
    // Read once the program has ended, so no late line of a worker is missed.
    expect(await replaced.program.stop()).toBe(0);
    expect(replaced.program.stdout().split(warning)).toHaveLength(2);

    // The rotation as the README describes it, the new key first: no warning, and the older key
    // is said to hold a state until that state is written again, which moves it.
    const keyring = { CONSENT_IDENTITY_KEY: `${another},${stored}`, CONSENT_LOG_LEVEL: "info" };
    const olderKey = parseIdentityKeys(stored)[0]?.id;
    const olderKeySays = (program: Program) =>
      program
        .stdout()
        .split("\n")
        .filter((line) => line.includes(`"identityKeyId":"${olderKey}"`))
        .map((line) => JSON.parse(line).msg as string);
    const rotated = await startService(dataDir, keyring);
    const written = await http(rotated.service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { bannerId: publicId, subjectId: "kept", baseVersion: 1, consentState: consentState() },
    });
    expect([written.status, written.body.data.version]).toEqual([200, 2]);
    expect(await rotated.program.stop()).toBe(0);
    expect(rotated.program.stdout()).not.toContain(warning);
    expect(olderKeySays(rotated.program)).toEqual([
      expect.stringContaining("an older identity key still holds stored subject states"),
    ]);
    const after = await startService(dataDir, keyring);
    expect(await after.program.stop()).toBe(0);
    expect(after.program.stdout()).not.toContain(warning);
    expect(olderKeySays(after.program)).toEqual([
      expect.stringContaining("an older identity key holds no stored subject state any more"),
    ]);
    // Five starts of the real programs, one with two workers: 27 s on a quiet two-core runner.
  }, 90_000);

  it("warns at start-up when its clock reads earlier than the newest consent log row", async () => {
    const dataDir = path.join(root, "clock-behind");
    const warning = "earlier than the newest consent log row was written";
    const first = await startService(dataDir);
    expect(await first.program.stop()).toBe(0);
    expect(first.program.stdout()).not.toContain(warning);
    // A row written by a clock 2 h 30 min ahead of this one: as if the clock was set back since.
    const writtenAt = new Date(Date.now() + (150 * 60 + 45) * 1_000);
    const store = await openLmdbStore({ dataDir });
    await store.consentLog.append(aConsentLogRow(randomUUID(), writtenAt));
    await store.close();

    const second = await startService(dataDir);
    expect(await second.program.stop()).toBe(0);
    const lines = second.program
      .stdout()
      .split("\n")
      .filter((line) => line.includes(warning));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0] as string);
    expect(line).toMatchObject({
      level: 40,
      service: "consentd",
      newestConsentLogRow: writtenAt.toISOString(),
    });
    expect(line.msg).toMatch(/^the clock reads 2 h 30 min earlier than the newest consent log row/);
    expect(line.msg).toContain("Consent log ids continue above the stored ones");
    expect(line.msg).toContain("Keep the clock synchronised (NTP)");
  });

  it("warns once, naming them, when files of the data dir can be read by other users", async () => {
    const dataDir = path.join(root, "exposed");
    const first = startProgram(PROGRAMS.consent, { CONSENT_DATA_DIR: dataDir });
    await first.waitFor(GATEWAY_URL);
    expect(first.stdout() + first.stderr()).not.toMatch(/other users may read or write/);
    expect(await first.stop()).toBe(0);

    // As an older version left them, or a copy made them.
    await chmod(path.join(dataDir, "admin-token"), 0o644);
    await chmod(path.join(dataDir, "records", "data.mdb"), 0o666);
    const second = startProgram(PROGRAMS.consent, { CONSENT_DATA_DIR: dataDir });
    const gatewayUrl = await second.waitFor(GATEWAY_URL);
    const warnings = (second.stdout() + second.stderr()).match(
      /other users may read or write[^\n]*/g,
    );
    expect(warnings).toHaveLength(1);
    expect(warnings?.[0]).toContain(`admin-token (644), records/data.mdb (666) in ${dataDir}`);
    expect((await fetch(`${gatewayUrl}/api/v1/health`)).status).toBe(200);
  });

  it("the gateway alone with no admin token exits non-zero with one readable line and no stack trace", async () => {
    const dataDir = await mkdtemp(path.join(root, "no-token-"));
    const program = startProgram(PROGRAMS.gateway, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_DAEMON_URL: "http://127.0.0.1:9",
    });
    const code = await program.exited;

    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    const message = program.stderr().trim();
    expect(message).not.toMatch(/^\s+at /m);
    expect(message).not.toMatch(/\.ts:\d+/);
    expect(message.split("\n")).toHaveLength(1);
    expect(message).toContain("CONSENT_ADMIN_TOKEN");
    expect(message).toContain(dataDir);
  });

  /**
   * Runs `bin` with `env` to its exit; at log level info, a server that started listening would
   * have said so on stdout.
   */
  async function refusedStart(bin: string, env: Record<string, string>) {
    const dataDir = await mkdtemp(path.join(root, "refused-"));
    const program = startProgram(bin, {
      CONSENT_DATA_DIR: dataDir,
      CONSENT_LOG_LEVEL: "info",
      ...env,
    });
    const code = await program.exited;
    if (program.child.stderr && !program.child.stderr.closed) {
      await once(program.child.stderr, "close");
    }
    return { code, stdout: program.stdout(), message: program.stderr().trim() };
  }

  /** One line on stderr, `<program>: <message>`, with no stack trace. */
  function expectOneLine(message: string, program: string) {
    expect(message).not.toMatch(/^\s+at /m);
    expect(message).not.toMatch(/\.[tj]s:\d+/);
    expect(message.split("\n")).toHaveLength(1);
    expect(message.startsWith(`${program}: `)).toBe(true);
  }

  it("a store whose files are cut short or overwritten stops npm start and consentd with exit code 1 and one line, not a crash", async () => {
    const dataDir = path.join(root, "damaged");
    const first = startProgram(PROGRAMS.consent, { CONSENT_DATA_DIR: dataDir });
    await first.waitFor(GATEWAY_URL);
    expect(await first.stop()).toBe(0);
    const dataFile = path.join(dataDir, "records", "data.mdb");
    const whole = await readFile(dataFile);
    const damages = [
      ["cut short", whole.subarray(0, whole.length / 2)],
      ["overwritten", Buffer.alloc(whole.length, 0x5a)],
    ] as const;
    for (const [damage, bytes] of damages) {
      await writeFile(dataFile, bytes);
      for (const [bin, name] of [
        [PROGRAMS.consent, "consent"],
        [PROGRAMS.consentd, "consentd"],
      ] as const) {
        const program = startProgram(bin, { CONSENT_DATA_DIR: dataDir });
        const code = await program.exited;
        if (program.child.stderr && !program.child.stderr.closed) {
          await once(program.child.stderr, "close");
        }
        const message = program.stderr().trim();
        expect([damage, code]).toEqual([damage, 1]);
        expectOneLine(message, name);
        expect(message).toContain(`cannot read the embedded store in ${dataDir}: `);
        expect(message).toContain("restore the directory from a backup");
      }
    }
  });

  it("a first start ended as LMDB created its data file (left empty) starts again and serves, the identity key kept or, when it never reached the disk, made", async () => {
    // What a first start leaves when SIGKILL (or a power cut) meets it between LMDB's creating
    // records/data.mdb and its writing the first pages: the secrets, and an empty data file.
    for (const identityKeyWritten of [true, false]) {
      const dataDir = await mkdtemp(path.join(root, "half-made-"));
      const token = randomBytes(32).toString("base64");
      await writeFile(path.join(dataDir, "admin-token"), `${token}\n`, { mode: 0o600 });
      const identityKey = randomBytes(32).toString("base64");
      if (identityKeyWritten) {
        await writeFile(path.join(dataDir, "identity-key"), `${identityKey}\n`, { mode: 0o600 });
      }
      await mkdir(path.join(dataDir, "records"), { mode: 0o700 });
      await writeFile(path.join(dataDir, "records", "data.mdb"), "", { mode: 0o600 });

      const { program, service } = await startService(dataDir);
      const { key } = await mintKey(service, await createTeam(service));
      const { publicId } = await createBanner(service, key);
      const put = await http(service, "PUT", "/api/v1/consent/subjects/state", {
        key,
        body: { bannerId: publicId, subjectId: "u", baseVersion: 0, consentState: consentState() },
      });
      expect([identityKeyWritten, put.status, put.body.data.version]).toEqual([
        identityKeyWritten,
        200,
        1,
      ]);
      const keyNow = (await readFile(path.join(dataDir, "identity-key"), "utf8")).trim();
      expect(keyNow === identityKey).toBe(identityKeyWritten);
      expect(program.stdout().includes("First start: created")).toBe(!identityKeyWritten);
      expect(program.stdout()).not.toContain("is missing");
      expect(program.stderr()).toBe("");
      expect(await program.stop()).toBe(0);
    }
  });

  it("an operator token no client could send as a Bearer token, or shorter than 32 characters, stops npm start with one line naming where it came from", async () => {
    const spaced = await refusedStart(PROGRAMS.consent, { CONSENT_ADMIN_TOKEN: "two words" });
    expect(spaced.code).toBe(1);
    expectOneLine(spaced.message, "consent");
    expect(spaced.message).toContain("CONSENT_ADMIN_TOKEN cannot be sent as a Bearer token");
    expect(spaced.message).not.toContain("two words");
    const short = await refusedStart(PROGRAMS.consent, { CONSENT_ADMIN_TOKEN: "s3cret-but-short" });
    expect(short.code).toBe(1);
    expectOneLine(short.message, "consent");
    expect(short.message).toContain("CONSENT_ADMIN_TOKEN is shorter than 32 characters");
    expect(short.message).not.toContain("s3cret-but-short");
  });

  it("a CONSENT_IDENTITY_KEY that is not a key stops npm start and consentd with exit code 1 and one line naming the variable, not the value", async () => {
    const value = "not-base64";
    for (const [bin, name] of [
      [PROGRAMS.consent, "consent"],
      [PROGRAMS.consentd, "consentd"],
    ] as const) {
      const { code, stdout, message } = await refusedStart(bin, { CONSENT_IDENTITY_KEY: value });
      expect(code).toBe(1);
      expectOneLine(message, name);
      expect(message).toContain("CONSENT_IDENTITY_KEY");
      expect(message).not.toContain(value);
      expect(stdout).not.toContain("listening");
    }
  });

  // Regression (under /proc): Node's recursive mkdir spun for ever, a core busy and deaf to a
  // first SIGTERM, on a directory the kernel refuses with ENOENT though its parent exists.
  it("a data directory that cannot be made (under a file, or under /proc) stops npm start and consentd with exit code 1 and one line", async () => {
    const file = path.join(await mkdtemp(path.join(root, "a-file-")), "not-a-directory");
    await writeFile(file, "");
    const programs = [
      [PROGRAMS.consent, "consent"],
      [PROGRAMS.consentd, "consentd"],
    ] as const;
    const dataDirs = [path.join(file, "data"), "/proc/consent-data"];
    await Promise.all(
      programs.flatMap(([bin, name]) =>
        dataDirs.map(async (dataDir) => {
          const refused = await refusedStart(bin, { CONSENT_DATA_DIR: dataDir });
          expect(refused.code).toBe(1);
          expectOneLine(refused.message, name);
          expect(refused.message).toContain(`cannot create the data directory ${dataDir}`);
        }),
      ),
    );
  });

  it("a log level pino lacks stops npm start and consentd, and a worker timeout too short stops npm start, with exit code 1 and one line", async () => {
    const programs = [
      [PROGRAMS.consent, "consent"],
      [PROGRAMS.consentd, "consentd"],
    ] as const;
    const [timeout] = await Promise.all([
      // Read with one worker too, where it has no worker to watch.
      refusedStart(PROGRAMS.consent, { CONSENT_WORKER_TIMEOUT_MS: "5" }),
      ...programs.map(async ([bin, name]) => {
        const level = await refusedStart(bin, { CONSENT_LOG_LEVEL: "verbose" });
        expect(level.code).toBe(1);
        expectOneLine(level.message, name);
        expect(level.message).toContain("CONSENT_LOG_LEVEL must be one of");
        return level;
      }),
    ]);
    expect(timeout.code).toBe(1);
    expectOneLine(timeout.message, "consent");
    expect(timeout.message).toContain("CONSENT_WORKER_TIMEOUT_MS must be");
  });

  it("a CONSENT_DRAIN_TIMEOUT_MS that is not a whole number of milliseconds from 1000 to 600000 stops every program before anything listens, with exit code 1 and one line naming the variable", async () => {
    const refusals = [
      [PROGRAMS.consent, "consent", "8s", {}],
      [PROGRAMS.consent, "consent", "-5000", { CONSENT_WORKERS: "2" }],
      [PROGRAMS.consentd, "consentd", "86400000", {}],
      [PROGRAMS.gateway, "consent-gateway", "500", { CONSENT_ADMIN_TOKEN: "a".repeat(32) }],
    ] as const;
    for (const [bin, name, value, env] of refusals) {
      const refused = await refusedStart(bin, { ...env, CONSENT_DRAIN_TIMEOUT_MS: value });
      expect([bin, refused.code]).toEqual([bin, 1]);
      expectOneLine(refused.message, name);
      expect(refused.message).toBe(
        `${name}: CONSENT_DRAIN_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 600000, not "${value}"`,
      );
      expect(refused.stdout).not.toContain("listening");
    }
  });

  it("one port for both listeners stops npm start with exit code 1 and one line naming the settings", async () => {
    const port = String(await freePort());
    const clash = await refusedStart(PROGRAMS.consent, {
      CONSENT_HTTP_PORT: port,
      CONSENT_GRPC_PORT: port,
    });
    expect(clash.code).toBe(1);
    expectOneLine(clash.message, "consent");
    expect(clash.message).toContain(`EADDRINUSE`);
    expect(clash.message).toContain("CONSENT_HTTP_PORT and CONSENT_GRPC_PORT are the same");
  });

  it("a taken port stops npm start with several workers with exit code 1 and one line for them all", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    try {
      const taken = await refusedStart(PROGRAMS.consent, {
        CONSENT_WORKERS: "2",
        CONSENT_HTTP_PORT: String((holder.address() as AddressInfo).port),
        CONSENT_GRPC_PORT: String(await freePort()),
      });
      expect(taken.code).toBe(1);
      expectOneLine(taken.message, "consent");
      expect(taken.message).toContain(
        "another process holds that port; choose another CONSENT_HTTP_PORT",
      );
    } finally {
      holder.close();
    }
  });

  it("a CONSENT_BASE_URL with a query string, a fragment and user info stops npm start, consentd and the gateway alone before anything listens, with exit code 1 and one line naming the variable and each part, never the password", async () => {
    // One address carrying all three parts, so each program is started once (a start costs some
    // 2 s of CPU); config.test.ts names each part of an address carrying it alone.
    const value = "https://operator:s3cret-pw@consent.example.com/consent?utm=1#top";
    const parts = "a query string (?...), a fragment (#...) and user info (user:password@)";
    const programs = [
      [PROGRAMS.consent, "consent"],
      [PROGRAMS.consentd, "consentd"],
      [PROGRAMS.gateway, "consent-gateway"],
    ] as const;
    await Promise.all(
      programs.map(async ([bin, name]) => {
        const { code, stdout, message } = await refusedStart(bin, {
          CONSENT_BASE_URL: value,
          CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
          CONSENT_DAEMON_URL: "http://127.0.0.1:9",
        });
        expect([name, code]).toEqual([name, 1]);
        expectOneLine(message, name);
        expect(message).toContain(`${name}: CONSENT_BASE_URL carries ${parts}: loader tags`);
        expect(message).not.toContain("s3cret-pw");
        expect(stdout).not.toContain("listening");
      }),
    );
  });

  it("a CONSENT_DAEMON_URL with an empty query or fragment stops the gateway alone, and one that is refused never has its password repeated", async () => {
    const refusals: [string, string][] = [
      ["http://127.0.0.1:9/?", "CONSENT_DAEMON_URL must be the daemon's address alone"],
      ["http://127.0.0.1:9#", "CONSENT_DAEMON_URL must be the daemon's address alone"],
      [
        "ftp://operator:s3cret-pw@127.0.0.1:9",
        'CONSENT_DAEMON_URL must be an http:// or https:// URL such as http://127.0.0.1:50051, not "ftp://***@127.0.0.1:9"',
      ],
    ];
    await Promise.all(
      refusals.map(async ([value, words]) => {
        const { code, stdout, message } = await refusedStart(PROGRAMS.gateway, {
          CONSENT_DAEMON_URL: value,
          CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
        });
        expect([value, code]).toEqual([value, 1]);
        expectOneLine(message, "consent-gateway");
        expect(message).toContain(`consent-gateway: ${words}`);
        expect(message).not.toContain("s3cret-pw");
        expect(stdout).not.toContain("listening");
      }),
    );
  });

  it("a refused MONGODB_URI, CONSENT_DAEMON_URL or CONSENT_BASE_URL is repeated without its user info, a user name or a password holding / ? # @ included", async () => {
    const refusals: [string, Record<string, string>, string][] = [
      [
        PROGRAMS.consentd,
        { MONGODB_URI: "mongodb://ops/admin:s3cret-pw@db.example:27017/shop" },
        'consentd: MONGODB_URI ("mongodb://***@db.example:27017/shop") is not a connection string MongoDB accepts: Username contains unescaped characters ***',
      ],
      [
        PROGRAMS.consent,
        { MONGODB_URI: "mongodb://ops-admin:s3cret-pw@db.example:27017/shop?tls=maybe" },
        'consent: MONGODB_URI ("mongodb://***@db.example:27017/shop?tls=maybe") is not a connection string MongoDB accepts: tls/ssl must be either "true" or "false"',
      ],
      [
        PROGRAMS.gateway,
        { CONSENT_DAEMON_URL: "http://ops-admin:s3cret/pw@127.0.0.1:9" },
        'consent-gateway: CONSENT_DAEMON_URL must be an absolute URL, not "http://***@127.0.0.1:9"',
      ],
      [
        PROGRAMS.consentd,
        { CONSENT_BASE_URL: "https://ops-admin:s3cret#pw@consent.example.com" },
        'consentd: CONSENT_BASE_URL must be an absolute URL, not "https://***@consent.example.com"',
      ],
    ];
    await Promise.all(
      refusals.map(async ([bin, env, words]) => {
        const { code, stdout, message } = await refusedStart(bin, {
          CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
          ...env,
        });
        expect([env, code, message]).toEqual([env, 1, words]);
        expect(message).not.toMatch(/ops|s3cret/);
        expect(stdout).not.toContain("listening");
      }),
    );
  });

  // Regression: a user name or password of one or two letters was masked wherever it stood as a
  // word of the driver's message ("can only be *** positive int value").
  it("a refused MONGODB_URI with a short user name and password keeps the driver's words whole, masking the user info alone", async () => {
    const { code, message } = await refusedStart(PROGRAMS.consentd, {
      CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
      MONGODB_URI: "mongodb://a:be@db.example:27017/shop?maxPoolSize=-1",
    });
    expect([code, message]).toEqual([
      1,
      'consentd: MONGODB_URI ("mongodb://***@db.example:27017/shop?maxPoolSize=-1") is not a connection string MongoDB accepts: maxPoolSize can only be a positive int value, got: -1',
    ]);
  });

  // Regression: the connection string was quoted with its query whole, so a key file's password,
  // the proxy's credentials or an AWS session token passed as options reached stderr and logs.
  it("a refused MONGODB_URI is repeated without the values of its secret options, nor a piece of one the driver names alone", async () => {
    const refusals: [string, string, string][] = [
      [
        PROGRAMS.consentd,
        "mongodb://db.example:27017/shop?tlsCertificateKeyFilePassword=k3y-s3cret&maxPoolSize=-1",
        'consentd: MONGODB_URI ("mongodb://db.example:27017/shop?tlsCertificateKeyFilePassword=***&maxPoolSize=-1") is not a connection string MongoDB accepts: maxPoolSize can only be a positive int value, got: -1',
      ],
      [
        PROGRAMS.consentd,
        "mongodb://db.example/shop?proxyHost=proxy.example&proxyUsername=px-s3cret-user&proxyPassword=px-s3cret&more-s3cret",
        'consentd: MONGODB_URI ("mongodb://db.example/shop?proxyHost=proxy.example&proxyUsername=***&proxyPassword=***&***") is not a connection string MongoDB accepts: URI option "***" cannot be specified with no value',
      ],
      [
        PROGRAMS.consent,
        "mongodb://db.example/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:t0ken-s3cret",
        'consent: MONGODB_URI ("mongodb://db.example/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:***") is not a connection string MongoDB accepts: AWS_SESSION_TOKEN cannot be provided when using MONGODB-AWS. Credentials must be provided in a manner that can be read by the AWS SDK.',
      ],
      [
        PROGRAMS.consentd,
        "mongodb://db.example/?tls=maybe&passphrase=pass-s3cret&key=-----BEGIN%20PRIVATE%20KEY-----s3cret",
        'consentd: MONGODB_URI ("mongodb://db.example/?tls=maybe&passphrase=***&key=***") is not a connection string MongoDB accepts: tls/ssl must be either "true" or "false"',
      ],
    ];
    await Promise.all(
      refusals.map(async ([bin, uri, words]) => {
        const { code, stdout, message } = await refusedStart(bin, {
          CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
          MONGODB_URI: uri,
        });
        expect([uri, code, message]).toEqual([uri, 1, words]);
        expect(`${stdout}${message}`).not.toContain("s3cret");
      }),
    );
  });

  it("a CONSENT_TRUST_PROXY entry that is not an address stops npm start and the gateway alone before anything listens, with exit code 1 and one line naming the variable and the entry", async () => {
    for (const [bin, name] of [
      [PROGRAMS.consent, "consent"],
      [PROGRAMS.gateway, "consent-gateway"],
    ] as const) {
      const { code, stdout, message } = await refusedStart(bin, {
        CONSENT_TRUST_PROXY: "10.0.0.0/8, notanip",
        CONSENT_ADMIN_TOKEN: "operator-token-for-the-gateway-alone",
        CONSENT_DAEMON_URL: "http://127.0.0.1:9",
      });
      expect(code).toBe(1);
      expectOneLine(message, name);
      expect(message).toContain("CONSENT_TRUST_PROXY");
      expect(message).toContain('"notanip"');
      expect(stdout).not.toContain("listening");
    }
  });
});
