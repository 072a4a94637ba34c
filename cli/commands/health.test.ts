import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clockCheck } from "#cli/commands/doctor-checks.js";
import type { CheckResult } from "#cli/components/check-list.js";
import { cliFor, E2E_TIMEOUT_MS, runCli, startHttp1Server } from "#cli/test-support/cli-process.js";
import { runCliOnTerminal } from "#cli/test-support/pseudo-terminal.js";
import { textWidth } from "#cli/text-width.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** A `doctor --json` run that exits 1 listing the check failed: its detail whole, its hint by a part. */
function expectFailedCheck(
  run: { code: number | null; stdout: string },
  name: string,
  detail: string,
  hintPart: string,
) {
  expect(run.code).toBe(1);
  expect(JSON.parse(run.stdout).checks).toContainEqual({
    name,
    status: "fail",
    detail,
    hint: expect.stringContaining(hintPart),
  });
}

describe.concurrent("consentctl health and doctor (against a real daemon)", {
  timeout: E2E_TIMEOUT_MS,
}, () => {
  let service: TestService;
  let cli: ReturnType<typeof cliFor>;

  beforeAll(async () => {
    service = await startTestService();
    cli = cliFor(service);
  });
  afterAll(() => service.close());

  it("reports daemon and store up, without needing a token", async () => {
    const result = await runCli(["health", "--daemon", service.daemonUrl, "--json"]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe("");
    expect(JSON.parse(result.stdout)).toMatchObject({
      daemon: { url: service.daemonUrl, reachable: true, status: "SERVING" },
      store: { ok: true, acceptsWrites: true },
      subjects: { ok: true },
    });
  });

  // Regression: health printed nothing on stdout (only an error on stderr) when the daemon was
  // not there; cli/README.md says the report still goes to stdout, as doctor's does.
  it("reports an unreachable daemon on stdout, with a hint, and exits 1", async () => {
    const [json, human] = await Promise.all([
      runCli(["health", "--daemon", "http://127.0.0.1:9", "--json"]),
      runCli(["health", "--daemon", "http://127.0.0.1:9"]),
    ]);
    expect(json.code).toBe(1);
    expect(json.stderr).toBe("");
    expect(JSON.parse(json.stdout)).toEqual({
      daemon: {
        url: "http://127.0.0.1:9",
        reachable: false,
        status: "UNKNOWN",
        message: "Cannot reach the daemon at http://127.0.0.1:9.",
        hint: expect.stringContaining("start it with `npm start`"),
      },
      store: { ok: false, acceptsWrites: null },
      subjects: { ok: null },
      latencyMs: null,
    });
    expect(human.code).toBe(1);
    expect(human.stderr).toBe("");
    expect(human.stdout).toMatch(/✖ daemon\s+Cannot reach the daemon at http:\/\/127\.0\.0\.1:9\./);
    expect(human.stdout).toContain("hint: start it with `npm start`");
    expect(human.stdout).toMatch(/– store\s+skipped: daemon not reachable/);
  });

  // Regression: against an HTTP/1.1 port both printed their report, then crashed on an unhandled
  // 'error' of the HTTP/2 session (stderr a Node stack trace).
  it("reports an address that is not the daemon's h2c port as such, without crashing", async () => {
    const other = await startHttp1Server();
    try {
      const [health, doctor] = await Promise.all([
        runCli(["health", "--daemon", other.url, "--json"]),
        runCli(["doctor", "--daemon", other.url, "--token", "x", "--json"]),
      ]);
      const message = `Something answered at ${other.url}, but it is not the daemon's gRPC (h2c) port.`;
      for (const result of [health, doctor]) {
        expect(result.code).toBe(1);
        expect(result.stderr).toBe("");
      }
      expect(JSON.parse(health.stdout).daemon).toEqual({
        url: other.url,
        reachable: false,
        status: "UNKNOWN",
        message,
        hint: expect.stringContaining("CONSENT_GRPC_PORT"),
      });
      expect(JSON.parse(doctor.stdout).checks).toContainEqual({
        name: "daemon",
        status: "fail",
        detail: message,
        hint: expect.stringContaining("CONSENT_GRPC_PORT"),
      });
    } finally {
      await other.close();
    }
  });

  it("passes every doctor check against a healthy daemon", async () => {
    const report = await cli.json(["doctor"]);
    expect(report.ok).toBe(true);
    expect(report.checks.map((c: { name: string; status: string }) => [c.name, c.status])).toEqual([
      ["config", "pass"],
      ["data files", "pass"],
      ["token", "pass"],
      ["daemon", "pass"],
      ["store", "pass"],
      ["token valid", "pass"],
      ["clock", "pass"],
    ]);
  });

  it("fails health and doctor while the subject endpoints have no identity key, saying so", async () => {
    const degraded = await startTestService({ identityKeys: [] });
    try {
      const degradedCli = cliFor(degraded);
      const [health, human, doctor] = await Promise.all([
        degradedCli.run(["health", "--json"]),
        degradedCli.run(["health"]),
        degradedCli.run(["doctor", "--json"]),
      ]);
      expect(health.code).toBe(1);
      expect(JSON.parse(health.stdout)).toMatchObject({
        daemon: { reachable: true, status: "SERVING" },
        store: { ok: true, acceptsWrites: true },
        subjects: { ok: false },
      });
      expect(human.code).toBe(1);
      expect(human.stdout).toContain("the subject endpoints answer 503 identity_unavailable");
      expectFailedCheck(
        doctor,
        "subjects",
        "the subject endpoints answer 503 identity_unavailable: the daemon has no identity key",
        "identity-key",
      );
    } finally {
      await degraded.close();
    }
  });

  it("fails the token check for a token no daemon would start with, saying why", async () => {
    const result = await runCli(
      ["doctor", "--daemon", service.daemonUrl, "--token", "short-token", "--json"],
      { env: { CONSENT_DATA_DIR: service.dataDir } },
    );
    expectFailedCheck(
      result,
      "token",
      "the token in --token is shorter than 32 characters: make one with `openssl rand -base64 32`",
      "no daemon starts with such a token",
    );
  });

  it("fails the data files check while other users may read a secret, naming it", async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), "consent-doctor-"));
    try {
      await writeFile(path.join(dataDir, "admin-token"), `${service.operatorToken}\n`, {
        mode: 0o644,
      });
      await chmod(path.join(dataDir, "admin-token"), 0o644);
      const doctor = () =>
        runCli(["doctor", "--daemon", service.daemonUrl, "--json"], {
          env: { CONSENT_DATA_DIR: dataDir },
        });
      const secret = `other users may read or write admin-token (644) in ${dataDir}`;
      expectFailedCheck(await doctor(), "data files", secret, "chmod 600");
      // A directory every user may write in: they could put a token of their own in place. (A
      // group that may write, as a Kubernetes volume's fsGroup gives, is the operator's choice.)
      await chmod(dataDir, 0o2770);
      expectFailedCheck(await doctor(), "data files", secret, "chmod 600");
      await chmod(dataDir, 0o777);
      expectFailedCheck(
        await doctor(),
        "data files",
        `other users may read or write the data directory (777), admin-token (644) in ${dataDir}`,
        "700 their directories",
      );
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  // Regression: a variable only the service reads, left malformed in consentctl's shell, failed
  // the doctor's config check and its exit status, though consentctl does not read it.
  it("warns of a malformed setting only the service reads, naming it the service's, and exits 0; other commands run", async () => {
    const env = { CONSENT_DRAIN_TIMEOUT_MS: "junk" };
    const [doctor, json, teams] = await Promise.all([
      cli.run(["doctor"], { env }),
      cli.run(["doctor", "--json"], { env }),
      cli.run(["teams", "list", "--json"], { env }),
    ]);
    expect(doctor.code).toBe(0);
    expect(doctor.stdout).toMatch(
      /! config\s+CONSENT_DRAIN_TIMEOUT_MS must be a whole number of milliseconds from 1000 to 600000, not "junk": a setting of the daemon and gateway, which consentctl does not read;/,
    );
    expect(doctor.stdout).toContain("No check failed; 1 warning.");
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout);
    expect(report.ok).toBe(true);
    expect(report.checks).toContainEqual({
      name: "config",
      status: "warn",
      detail: expect.stringContaining('not "junk": a setting of the daemon and gateway'),
      hint: expect.stringContaining("fix or unset the variable"),
    });
    expect(report.checks.filter((c: CheckResult) => c.status !== "pass")).toHaveLength(1);
    expect(teams.code).toBe(0);
    expect(JSON.parse(teams.stdout)).toHaveProperty("teams");
  });

  it("reports each problem on its own line and exits 1: bad env, bad token, no daemon", async () => {
    const [badEnv, badDaemonUrl, badToken, noDaemon] = await Promise.all([
      cli.run(["doctor", "--json"], { env: { CONSENT_DAEMON_URL: "notaurl" } }),
      runCli(["doctor", "--json"], {
        env: { CONSENT_DAEMON_URL: "notaurl", CONSENT_DATA_DIR: service.dataDir },
      }),
      // Well formed, and not the daemon's: found, then refused.
      runCli(["doctor", "--daemon", service.daemonUrl, "--token", "w".repeat(43), "--json"]),
      runCli(["doctor", "--daemon", "http://127.0.0.1:9", "--token", "x".repeat(43)]),
    ]);
    const statuses = (run: { stdout: string }) =>
      Object.fromEntries(
        JSON.parse(run.stdout).checks.map((c: { name: string; status: string }) => [
          c.name,
          c.status,
        ]),
      );
    expect(badEnv.code).toBe(1);
    expect(statuses(badEnv)).toMatchObject({
      config: "fail",
      daemon: "pass",
      "token valid": "pass",
    });
    // Without --daemon, an unreadable environment leaves no daemon address to probe.
    expect(badDaemonUrl.code).toBe(1);
    expect(statuses(badDaemonUrl)).toMatchObject({
      config: "fail",
      daemon: "skip",
      store: "skip",
      "token valid": "skip",
      clock: "skip",
    });
    expect(badToken.code).toBe(1);
    expect(statuses(badToken)).toMatchObject({ token: "pass", "token valid": "fail" });
    expect(noDaemon.code).toBe(1);
    expect(noDaemon.stderr).toBe("");
    expect(noDaemon.stdout).toMatch(
      /✖ daemon\s+Cannot reach the daemon at http:\/\/127\.0\.0\.1:9\./,
    );
    expect(noDaemon.stdout).toMatch(/– token valid\s+skipped: daemon not reachable/);
    expect(noDaemon.stdout).toContain("1 check failed.");
  });

  // Regression: on an 80-column terminal a detail or hint longer than its line wrapped back to
  // the first column, across the check names, and split `npm start` there.
  it("wraps a long detail and hint on an 80-column terminal under the detail column", async () => {
    const env = { CONSENT_DATA_DIR: service.dataDir };
    const [healthy, noDaemon] = await Promise.all(
      [service.daemonUrl, "http://127.0.0.1:9"].map(async (daemonUrl) => {
        const args = ["doctor", "--daemon", daemonUrl, "--token", service.operatorToken];
        const [json, shown] = await Promise.all([
          runCli([...args, "--json"], { env }),
          runCliOnTerminal(args, env, { columns: 80 }),
        ]);
        return { checks: JSON.parse(json.stdout).checks as CheckResult[], ...shown };
      }),
    );
    expect(healthy?.code).toBe(0);
    expect(noDaemon?.code).toBe(1);
    for (const run of [healthy, noDaemon]) {
      const lines = stripVTControlCharacters(run?.screen ?? "").split("\r\n");
      const first = lines.findIndex((line) => line.startsWith("✔ config"));
      const shown = lines.slice(first, lines.indexOf("", first));
      for (const line of shown) {
        expect(textWidth(line)).toBeLessThanOrEqual(80);
        // "token valid" is the longest name: the text starts 15 columns in, on every line (Ink
        // carries the space after a line that fills its column over to the next one).
        expect(line).toMatch(/^([✔✖–] [a-z ]{11} {2}| {15} ?)\S/);
      }
      // Each check's lines, read in turn, say its detail and hint whole (aside from what may
      // change between the two runs: the latency, the count of teams, which the file's other
      // tests create meanwhile, and the clocks' difference, read from whole seconds).
      const words = (text: string) =>
        text
          .replace(/\(\d+ ms\)/g, "(N ms)")
          .replace(/\(\d+ teams?\)/g, "(N teams)")
          .replace(/in step with the daemon's \(to the second\)/g, "SKEW the daemon's")
          .replace(/\d+ s (ahead of|behind) the daemon's/g, "SKEW the daemon's")
          .split(/\s+/)
          .filter(Boolean);
      const mark = { pass: "✔", fail: "✖", warn: "!", skip: "–" };
      expect(words(shown.join(" "))).toEqual(
        run?.checks.flatMap((check) => [
          mark[check.status],
          ...words(check.name),
          ...words(check.detail),
          ...(check.hint && check.status !== "pass" ? words(`hint: ${check.hint}`) : []),
        ]),
      );
    }
    expect(noDaemon?.screen).toContain("hint: start it with `npm start`");
  });

  it("reports NOT_SERVING and exits 1 when the daemon's store is gone", async () => {
    const broken = await startTestService();
    try {
      await broken.store.close();
      const [result, doctor] = await Promise.all([
        runCli(["health", "--daemon", broken.daemonUrl, "--json"]),
        runCli(["doctor", "--daemon", broken.daemonUrl, "--token", broken.operatorToken, "--json"]),
      ]);
      expect(result.code).toBe(1);
      expect(JSON.parse(result.stdout)).toMatchObject({
        daemon: { reachable: true, status: "NOT_SERVING" },
        store: { ok: false },
        // Every name is NOT_SERVING then: nothing is said of the identity key.
        subjects: { ok: null },
      });
      const checks = JSON.parse(doctor.stdout).checks.map((c: { name: string }) => c.name);
      expect(checks).toContain("store");
      expect(checks).not.toContain("subjects");
    } finally {
      await broken.close().catch(() => undefined); // the store is already closed
    }
  });
});

describe("doctor's clock check", () => {
  it("passes within 30 s, fails beyond with an NTP hint, skips without a date header", () => {
    expect(clockCheck(new Date(Date.now() - 2_000), true)).toMatchObject({
      status: "pass",
      detail: "local clock is 2 s ahead of the daemon's",
    });
    expect(clockCheck(new Date(Date.now() + 120_000), true)).toMatchObject({
      status: "fail",
      detail: "local clock is 120 s behind the daemon's",
      hint: expect.stringContaining("NTP"),
    });
    // Clocks in step: the header is this second, cut down, whatever part of it has passed.
    expect(clockCheck(new Date(Math.floor(Date.now() / 1000) * 1000), true)).toMatchObject({
      status: "pass",
      detail: "local clock is in step with the daemon's (to the second)",
    });
    expect(clockCheck(undefined, true)).toMatchObject({
      status: "skip",
      detail: "skipped: the daemon sent no date header",
    });
  });
});
