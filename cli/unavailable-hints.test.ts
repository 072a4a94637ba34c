import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { argv, cliFor, E2E_TIMEOUT_MS, runCli } from "#cli/test-support/cli-process.js";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { emptyDatabase } from "#daemon/store/mongo-wire-stand-in.js";
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
