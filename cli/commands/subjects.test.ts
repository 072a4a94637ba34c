import type { JsonObject } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  argv,
  type cliFor,
  E2E_TIMEOUT_MS,
  runCli,
  startServiceWithTeam,
} from "#cli/test-support/cli-process.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { consentState } from "#test/support/api.js";
import type { TestService } from "#test/support/service.js";

describe.concurrent("consentctl subjects (against a real daemon)", {
  timeout: E2E_TIMEOUT_MS,
}, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;
  let teamId: string;
  let publicId: string;
  let key: string;
  let n = 0;

  /** Stores a consent state the way an integrator does: SubjectService with a live key. */
  async function storeState(
    subjectId: string,
    namespace?: string,
    state: Record<string, unknown> = consentState(),
  ) {
    const subjects = createClient(
      SubjectService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    await subjects.putSubjectState(
      {
        bannerId: publicId,
        namespace,
        subjectId,
        baseVersion: 0,
        consentState: state as JsonObject,
      },
      { headers: { authorization: `Bearer ${key}` } },
    );
  }
  const args = (command: string, subjectId: string, ...extra: string[]) => [
    ...argv`subjects ${command} --team ${teamId} --banner ${publicId} --subject ${subjectId}`,
    ...extra,
  ];

  beforeAll(async () => {
    // With the gateway: `--json` is compared with REST's answer.
    ({ service, cli, teamId } = await startServiceWithTeam("professional", {}, { gateway: true }));
    const banner = await cli.json(
      argv`banners create --team ${teamId} --name B --domain example.com`,
    );
    publicId = banner.publicId;
    const scopes = "consent:read,consent:write";
    key = (await cli.json(argv`keys create --team ${teamId} --env live --scopes ${scopes}`)).key;
  });
  afterAll(() => service.close());

  it("resolves a subject without a stored state as found: false", async () => {
    expect(await cli.json(args("resolve", `nobody-${++n}`))).toEqual({ found: false });
  });

  it("resolves a stored state, deletes it, then finds nothing", async () => {
    const subject = `user-${++n}`;
    await storeState(subject, "shop");
    const found = await cli.json(args("resolve", subject, "--namespace", "shop"));
    expect(found).toMatchObject({
      found: true,
      version: 1,
      consentState: { acceptType: "custom", schemaVersion: 2 },
    });
    // Another namespace is another subject.
    expect(await cli.json(args("resolve", subject))).toEqual({ found: false });
    expect(await cli.json(args("delete", subject, "--namespace", "shop"))).toEqual({ deleted: 1 });
    expect(await cli.json(args("delete", subject, "--namespace", "shop"))).toEqual({ deleted: 0 });
    expect(await cli.json(args("resolve", subject, "--namespace", "shop"))).toEqual({
      found: false,
    });
  });

  // Regression: `--json` nested the snapshot under `snapshot` (the proto's shape), where REST's
  // `data` has its fields beside `found`, and wrote its times without a zero millisecond
  // fraction (`…:05Z`), where REST writes `.000Z`.
  it("prints what REST's resolve answers as data, the snapshot's fields beside found", async () => {
    const subject = `rest-${++n}`;
    await storeState(subject);
    const response = await fetch(`${service.gatewayUrl}/api/v1/consent/subjects/resolve`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ bannerId: publicId, subjectId: subject }),
    });
    expect(response.status).toBe(200);
    const rest = (await response.json()).data;
    const printed = await cli.json(args("resolve", subject));
    expect(printed).toEqual(rest);
    expect(Object.keys(printed)).toEqual([
      "found",
      "consentState",
      "protocolVersion",
      "version",
      "clientUpdatedAt",
      "updatedAt",
      "expiresAt",
    ]);
    expect(printed).toMatchObject({
      found: true,
      version: 1,
      // As the client wrote it, as REST gives it back.
      clientUpdatedAt: "2026-11-21T10:00:00.000Z",
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      expiresAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  // Regression: the client time was shown as the client wrote it (`2026-11-21T12:00:00.750+02:00`)
  // where every other time the CLI prints is UTC to the second.
  it("shows the client time in UTC to the second, as it shows every other time", async () => {
    const subject = `client-time-${++n}`;
    await storeState(
      subject,
      undefined,
      consentState({
        consentTimestamp: "2026-11-21T12:00:00.750+02:00",
        lastConsentTimestamp: "2026-11-21T12:00:00.750+02:00",
      }),
    );
    const shown = await cli.run(args("resolve", subject));
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^Client time\s+2026-11-21 10:00:00Z$/m);
    expect(shown.stdout).toMatch(/^Updated\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/m);
    // --json keeps it as written, as REST does.
    expect((await cli.json(args("resolve", subject))).clientUpdatedAt).toBe(
      "2026-11-21T12:00:00.750+02:00",
    );
  });

  it("prints the consent state for a human, and says so when none is stored", async () => {
    const subject = `human-${++n}`;
    await storeState(subject);
    const [found, missing] = await Promise.all([
      cli.run(args("resolve", subject)),
      cli.run(args("resolve", `absent-${++n}`)),
    ]);
    expect(found.stdout).toContain('"acceptType": "custom"');
    expect(missing.stdout).toContain("No consent state is stored for this subject.");
  });

  it("exits 1 for an invalid subject id or an unknown banner, with the daemon's reason", async () => {
    const [invalid, unknown] = await Promise.all([
      cli.fails(args("resolve", "someone@example.com")),
      cli.fails(
        argv`subjects resolve --team ${teamId} --banner 00000000-0000-4000-8000-000000000000 --subject x`,
      ),
    ]);
    expect(invalid.details).toEqual([
      { field: "subjectId", message: "subjectId must not contain @" },
    ]);
    expect(unknown).toMatchObject({
      code: "not_found",
      hint: expect.stringContaining("public id"),
    });
  });

  // Regression: the empty team went to the daemon: "Operator calls must name a team in
  // consent-team metadata.", exit 1.
  it("exits 2 for an empty --team, as an unset variable gives, before calling the daemon", async () => {
    const result = await cli.run(
      argv`subjects resolve --team ${""} --banner ${publicId} --subject x`,
    );
    expect(result.code).toBe(2);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(
      "option '--team <id>' argument '' is invalid. the team id is empty (is the variable it came from set?).",
    );
  });

  // Regression: a line break in --team or --token ended in "consentctl failed unexpectedly:
  // Headers.set: … is an invalid header value" (code internal), an escape sequence in --team in
  // "Operator calls must name a team".
  it("exits 2 for a --team or --token no metadata can carry, and 1 for such a CONSENT_ADMIN_TOKEN", async () => {
    for (const team of ["x\ny", "t\u001b[2J", "a b"]) {
      const result = await cli.run(
        argv`subjects resolve --team ${team} --banner ${publicId} --subject x`,
      );
      expect([team, result.code, result.stdout]).toEqual([team, 2, ""]);
      expect(result.stderr).toContain(
        "the team id holds a space, a control character or a non-ASCII character",
      );
    }
    const connection = ["--daemon", service.daemonUrl];
    const byFlag = await runCli(["teams", "list", "--json", ...connection, "--token", "abc\ndef"]);
    expect(byFlag.code).toBe(2);
    expect(JSON.parse(byFlag.stderr)).toMatchObject({
      code: "usage",
      error: expect.stringContaining("the token holds a space, a control character"),
    });
    const byEnv = await runCli(["teams", "list", "--json", ...connection], {
      env: { CONSENT_ADMIN_TOKEN: "abc\ndef", CONSENT_DATA_DIR: service.dataDir },
    });
    expect(byEnv.code).toBe(1);
    expect(JSON.parse(byEnv.stderr)).toMatchObject({
      code: "token_unreadable",
      error: expect.stringContaining("The operator token in CONSENT_ADMIN_TOKEN holds a space"),
    });
  });

  it("says in --help that the daemon hashes the subject id", async () => {
    const help = await cli.run(argv`subjects resolve --help`);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("hashes it");
    expect(help.stdout).toContain("never stores it");
  });
});
