import {
  chmod,
  lstat,
  mkdtemp,
  readdir,
  readFile,
  stat,
  symlink,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { argv, cliFor, E2E_TIMEOUT_MS } from "#cli/test-support/cli-process.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * An operator's whole job, through the CLI only, checked from the integrator's side: what
 * consentctl mints works against BannerService, and what it revokes stops working.
 */
describe("operator flow: team → key → banner → rotate → revoke → session → logs", {
  timeout: E2E_TIMEOUT_MS,
}, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let banners: ReturnType<typeof createClient<typeof BannerService>>;

  /** ListBanners as an integrator: the machine code of the failure, or the banner ids. */
  async function listWith(headers: Record<string, string>): Promise<string[] | string> {
    try {
      return (await banners.listBanners({}, { headers })).banners.map((b) => b.id);
    } catch (error) {
      const connectError = ConnectError.from(error);
      expect(connectError.code).toBe(Code.Unauthenticated);
      return connectError.findDetails(ErrorInfoSchema)[0]?.code ?? "?";
    }
  }
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

  beforeAll(async () => {
    service = await startTestService();
    cli = cliFor(service);
    banners = createClient(BannerService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  });
  afterAll(() => service.close());

  it("mints a key that works, rotates it away and revokes its successor", async () => {
    const team = await cli.json(["teams", "create", "--name", "Flow", "--plan", "starter"]);
    const banner = await cli.json(
      argv`banners create --team ${team.id} --name Site --domain flow.example.com`,
    );
    const first = await cli.json(
      argv`keys create --team ${team.id} --env live --scopes banners:read`,
    );
    expect(await listWith(bearer(first.key))).toEqual([banner.id]);

    const second = await cli.json(["keys", "rotate", first.id, "--grace", "0"]);
    expect(await listWith(bearer(first.key))).toBe("expired_key");
    expect(await listWith(bearer(second.key))).toEqual([banner.id]);

    await cli.json(["keys", "revoke", second.id]);
    expect(await listWith(bearer(second.key))).toBe("revoked_key");

    const { keys } = await cli.json(["keys", "list", "--team", team.id]);
    expect(keys.map((k: { id: string }) => k.id).sort()).toEqual([first.id, second.id].sort());
  });

  it("mints a dashboard session that works until it is revoked", async () => {
    const team = await cli.json(["teams", "create", "--name", "Dashboard", "--plan", "free"]);
    const session = await cli.json(["sessions", "create", "--team", team.id, "--ttl", "1h"]);
    expect(await listWith({ "consent-session": session.token })).toEqual([]);
    await cli.json(["sessions", "revoke", session.id]);
    expect(await listWith({ "consent-session": session.token })).toBe("unauthorized");
  });

  it("publishes a banner, watches a visitor's choice arrive, and exports it as proof", async () => {
    const team = await cli.json(["teams", "create", "--name", "Proof", "--plan", "business"]);
    const banner = await cli.json(
      argv`banners create --team ${team.id} --name Shop --domain proof.example.com`,
    );
    const published = await cli.json(argv`banners publish ${banner.id} --team ${team.id}`);
    expect(published.loaderSnippet).toContain(`/loader/${banner.publicId}.js`);
    const tail = cli.start(argv`logs tail --team ${team.id}`);
    await tail.waitFor("stderr", (text) => text.includes("press Ctrl-C to stop"));
    // The visitor's choice, as the gateway relays it: RecordConsent over gRPC.
    const logs = createClient(
      ConsentLogService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const { consentLogId } = await logs.recordConsent({
      bannerId: banner.publicId,
      preferences: { necessary: true, analytics: true },
      method: "accept_all",
      timestamp: new Date().toISOString(),
      requestOrigin: { origin: "https://proof.example.com" },
    });
    const consentId = (await cli.json(argv`logs list --team ${team.id}`)).entries[0].consentId;
    await tail.waitFor("stdout", (text) => text.includes(consentId));
    // The whole run on a failure: how it ended (a signal?) and what it printed.
    expect(await tail.interrupt()).toMatchObject({ code: 0, signal: null });
    const out = path.join(service.dataDir, "proof.jsonl");
    const summary = await cli.json(
      argv`logs export --team ${team.id} --banner ${banner.publicId} --out ${out}`,
    );
    expect(summary).toEqual({ rows: 1, format: "jsonl", out });
    const [row] = (await readFile(out, "utf8"))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(row).toMatchObject({ consentLogId, consentId, method: "accept_all" });

    // A tail whose reader leaves (`| head -n1`) ends quietly with exit 0, not as a fault.
    const reader = cli.start(argv`logs tail --team ${team.id} --json`);
    reader.closeStdout();
    let ended = false;
    void reader.ended.then(() => {
      ended = true;
    });
    // Choices until the tail, once following, writes one and finds its reader gone.
    while (!ended) {
      await logs.recordConsent({
        bannerId: banner.publicId,
        preferences: { necessary: true },
        method: "accept_necessary",
        timestamp: new Date().toISOString(),
        requestOrigin: { origin: "https://proof.example.com" },
      });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(await reader.ended).toMatchObject({ code: 0, signal: null, stderr: "" });
  });

  it("leaves an existing export file as it was when the export fails, reports a file it cannot write, and follows a link", async () => {
    const directory = await mkdtemp(path.join(service.dataDir, "export-"));
    const out = path.join(directory, "proof.csv");
    await writeFile(out, "an earlier export\n");
    const failed = await cli.run(argv`logs export --team no-such-team --format csv --out ${out}`);
    expect([failed.code, failed.stderr]).toEqual([1, expect.stringContaining("No team with id")]);
    expect(await readFile(out, "utf8")).toBe("an earlier export\n");
    expect(await readdir(directory)).toEqual(["proof.csv"]);

    // A file that cannot be written (a full disk) is an error, never a hang or a cut-short proof.
    const team = await cli.json(["teams", "create", "--name", "Disk", "--plan", "free"]);
    const full = await cli.run(argv`logs export --team ${team.id} --format csv --out /dev/full`);
    expect([full.code, full.stderr]).toEqual([
      1,
      expect.stringContaining("Cannot write /dev/full"),
    ]);

    // A link is followed: the file it names is replaced, keeping its permissions.
    const linked = path.join(directory, "latest.csv");
    await symlink(out, linked);
    await chmod(out, 0o640);
    const exported = await cli.run(
      argv`logs export --team ${team.id} --format csv --out ${linked}`,
    );
    expect(exported.code).toBe(0);
    expect((await lstat(linked)).isSymbolicLink()).toBe(true);
    expect(await readFile(out, "utf8")).toMatch(/^consentLogId,/);
    expect((await stat(out)).mode & 0o777).toBe(0o640);
    expect((await readdir(directory)).sort()).toEqual(["latest.csv", "proof.csv"]);
  });
});
