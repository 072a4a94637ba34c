import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { argv, cliFor, E2E_TIMEOUT_MS, runCli } from "#cli/test-support/cli-process.js";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
import { createTeam } from "#test/support/api.js";
import { startTestService } from "#test/support/service.js";
import { startStandInDaemon } from "#test/support/stand-in-daemon.js";

/**
 * consentctl's hint for a daemon's 503: what the operator does about it, not only its words
 * ("retry later"), which for a missing identity key would never come true by itself.
 */

const made: string[] = [];
afterAll(async () => {
  for (const dir of made) await rm(dir, { recursive: true, force: true });
});

describe("consentctl told unavailable by the daemon", { timeout: E2E_TIMEOUT_MS }, () => {
  it("says how to give the daemon back its identity key when it went missing", async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), "consent-lost-key-"));
    made.push(dataDir);
    // A store made with a key, whose identity-key file is then lost: the daemon starts without
    // one (README, "Privacy") and every subject call answers 503 identity_unavailable.
    const first = await startTestService({ dataDir });
    const firstCli = cliFor(first);
    const teamId = (await firstCli.json(argv`teams create --name Acme --plan professional`)).id;
    const { publicId } = await firstCli.json(
      argv`banners create --team ${teamId} --name B --domain example.com`,
    );
    await first.close();
    await rm(path.join(dataDir, "identity-key"));

    const second = await startTestService({ dataDir });
    try {
      const resolve = argv`subjects resolve --team ${teamId} --banner ${publicId} --subject user-1`;
      const secondCli = cliFor(second);
      expect(await secondCli.fails(resolve)).toEqual({
        error: "Subject identity hashing is temporarily unavailable; retry later.",
        code: "identity_unavailable",
        hint: 'see the daemon\'s log: restore <data dir>/identity-key from a backup, or set CONSENT_IDENTITY_KEY to the key the records were hashed with (README, "Privacy"), then restart the daemon',
      });
      const human = await secondCli.run(resolve);
      expect(human.code).toBe(1);
      expect(human.stderr).toContain("restore <data dir>/identity-key from a backup");
    } finally {
      await second.close();
    }
  });

  // Regression: a tail whose read the store stopped at its time limit was told "if it goes on,
  // see the daemon's log", where the daemon logs nothing for it (README, "MongoDB").
  it("says what to do about a tail whose read the store stopped, which the daemon does not log", async () => {
    const logged: Record<string, unknown>[] = [];
    // A store whose every consent log read stops at its first check of the time, a thousand
    // rows in (CONSENT_LOG_READ_TIMEOUT_MS at 0).
    const service = await startTestService({
      logReadLimitMs: 0,
      onLog: (entry) => logged.push(entry),
    });
    try {
      const teamId = await createTeam(service);
      // More rows than that in the tail's lookback: received ten minutes from now, so they are
      // in it however long the set-up and consentctl's start take.
      const later = Date.now() + 600_000;
      await Promise.all(
        Array.from({ length: 1_500 }, (_, i) =>
          service.store.consentLog.append(aConsentLogRow(teamId, new Date(later + i))),
        ),
      );
      const tail = await runCli([
        ...argv`logs tail --team ${teamId} --json`,
        ...argv`--daemon ${service.daemonUrl} --token ${service.operatorToken}`,
      ]);
      expect([tail.code, tail.stdout]).toEqual([1, ""]);
      expect(JSON.parse(tail.stderr)).toEqual({
        error: "The store did not read the tail's latest rows within its time limit; retry later.",
        code: "unavailable",
        hint: "retry in 5 s; if it goes on, the store is too busy to read the team's newest rows within its time limit, which the daemon does not log: lighten the store's load, or raise CONSENT_LOG_READ_TIMEOUT_MS (CONSENT_MONGODB_TIMEOUT_MS on MongoDB)",
      });
      expect(logged).toEqual([]);
    } finally {
      await service.close();
    }
  });

  it.each([
    { code: 64, codeName: "WriteConcernFailed", retryAfter: 1 },
    { code: 100, codeName: "UnsatisfiableWriteConcern", retryAfter: 300 },
  ])(
    "says to retry after the daemon's Retry-After when its store is out of reach ($codeName)",
    async ({ code, codeName, retryAfter }) => {
      const operatorToken = generateOperatorToken();
      const database = emptyDatabase(undefined, {
        insert: (command) => ({
          n: command.documents.length,
          ok: 1,
          writeConcernError: { code, codeName, errmsg: "no majority" },
        }),
      });
      const daemon = await startStandInDaemon(database, { operatorToken });
      try {
        const result = await runCli([
          ...argv`teams create --name Acme --plan free --json`,
          ...argv`--daemon ${daemon.daemonUrl} --token ${operatorToken}`,
        ]);
        expect([result.code, result.stdout]).toEqual([1, ""]);
        expect(JSON.parse(result.stderr)).toEqual({
          error: "The store is temporarily unavailable; retry later.",
          code: "unavailable",
          hint: `retry in ${retryAfter} s; if it goes on, see the daemon's log`,
        });
      } finally {
        await daemon.close();
      }
    },
  );
});
