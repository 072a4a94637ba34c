import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { open } from "lmdb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliFor, E2E_TIMEOUT_MS } from "#cli/test-support/cli-process.js";
import { consentState, http } from "#test/support/api.js";
import { aChoice, bannerFixture, postLog, storedRows } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

describe("consentctl backup (against a running service)", { timeout: E2E_TIMEOUT_MS }, () => {
  let service: TestService;
  let restored: TestService | undefined;
  let backups: string;

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    backups = await mkdtemp(path.join(tmpdir(), "consent-backups-"));
  });
  afterAll(async () => {
    await restored?.close();
    await service.close();
    await rm(backups, { recursive: true, force: true });
  });

  const putState = (target: TestService, key: string, publicId: string, subjectId: string) =>
    http(target, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { bannerId: publicId, subjectId, baseVersion: 0, consentState: consentState() },
    });
  const resolve = (target: TestService, key: string, publicId: string, subjectId: string) =>
    http(target, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: { bannerId: publicId, subjectId },
    });

  it("copies the store and its secrets into a new owner-only directory a daemon restores from", async () => {
    const { teamId, key, publicId } = await bannerFixture(service);
    expect((await putState(service, key, publicId, "before")).status).toBe(200);
    expect((await postLog(service, aChoice(publicId))).status).toBe(200);

    const to = path.join(backups, "nightly");
    const cli = cliFor(service);
    const report = await cli.json(["backup", "--to", to]);
    expect(report).toEqual({
      to,
      files: [
        { file: "records/data.mdb", bytes: expect.any(Number) },
        { file: "admin-token", bytes: expect.any(Number) },
        { file: "identity-key", bytes: expect.any(Number) },
      ],
      identityKeyIncluded: true,
      warnings: [],
    });
    // Whole and private: nothing else beside it, nothing of it readable by others.
    expect(await readdir(backups)).toEqual(["nightly"]);
    expect((await stat(to)).mode & 0o777).toBe(0o700);
    expect((await stat(path.join(to, "records"))).mode & 0o777).toBe(0o700);
    for (const { file } of report.files) {
      expect([file, (await stat(path.join(to, file))).mode & 0o777]).toEqual([file, 0o600]);
    }
    // Written after the snapshot: not in the backup.
    expect((await putState(service, key, publicId, "after")).status).toBe(200);
    // A backup of the backup, which no daemon has opened: the lock file it makes is owner-only.
    // With the identity key also in the environment, the report says which one a daemon uses.
    const copy = await cliFor(service, {
      CONSENT_DATA_DIR: to,
      CONSENT_IDENTITY_KEY: "ik_2:c29tZSBvdGhlciBrZXkgb2YgMzIgYnl0ZXMgbG9uZyE=",
    }).json(["backup", "--to", path.join(backups, "copy")]);
    expect(copy.files).toHaveLength(3);
    expect(copy.warnings).toEqual([
      "CONSENT_IDENTITY_KEY is set here: a daemon that reads it uses it, not the identity-key file; keep that value with this backup",
    ]);
    expect((await stat(path.join(to, "records", "lock.mdb"))).mode & 0o777).toBe(0o600);

    restored = await startTestService({ dataDir: to, gateway: true });
    expect(restored.operatorToken).toBe(service.operatorToken);
    // The same key, the same banner, the subject found again under the same identity key.
    const before = await resolve(restored, key, publicId, "before");
    expect([before.status, before.body.data.found]).toEqual([200, true]);
    expect(before.body.data.consentState).toEqual(
      (await resolve(service, key, publicId, "before")).body.data.consentState,
    );
    const after = await resolve(restored, key, publicId, "after");
    expect(after.body.data).toEqual({ found: false });
    expect(await storedRows(restored, teamId)).toEqual(await storedRows(service, teamId));
  });

  it("never writes over a directory, makes no missing parents, and says where no store is", async () => {
    const cli = cliFor(service);
    const taken = path.join(backups, "taken");
    expect((await cli.json(["backup", "--to", taken])).to).toBe(taken);
    expect(await cli.fails(["backup", "--to", taken])).toMatchObject({
      error: `${taken} already exists.`,
      code: "backup_exists",
    });

    // The longest name a directory may have: the draft's own name does not grow with it.
    const longest = path.join(backups, "n".repeat(255));
    expect((await cli.json(["backup", "--to", longest])).to).toBe(longest);

    const inside = path.join(service.dataDir, "nightly");
    expect((await cli.json(["backup", "--to", inside])).warnings).toEqual([
      "the backup lies inside the data directory: it is lost with that directory or its disk; move it elsewhere",
    ]);

    // Regression: an empty --to (an unset variable) was the working directory: "… already exists".
    const emptyTo = await cli.run(["backup", "--to", "", "--json"]);
    expect(emptyTo.code).toBe(2);
    expect(JSON.parse(emptyTo.stderr)).toEqual({
      error:
        "option '--to <dir>' argument '' is invalid. the backup directory is empty (is the variable it came from set?).",
      code: "usage",
    });

    const orphan = path.join(backups, "missing", "nightly");
    expect(await cli.fails(["backup", "--to", orphan])).toMatchObject({
      error: `Cannot create the backup: ${path.dirname(orphan)} does not exist.`,
      code: "backup_failed",
    });

    const underFile = path.join(taken, "admin-token", "nightly");
    expect(await cli.fails(["backup", "--to", underFile])).toMatchObject({
      error: `Cannot look at ${underFile}: a part of the path is a file, not a directory.`,
      code: "backup_failed",
    });

    const empty = await mkdtemp(path.join(tmpdir(), "consent-nostore-"));
    try {
      const elsewhere = cliFor(service, { CONSENT_DATA_DIR: empty });
      expect(await elsewhere.fails(["backup", "--to", path.join(backups, "never")])).toMatchObject({
        error: `There is no embedded store in ${empty}.`,
        code: "no_store",
        hint: expect.stringContaining("mongodump"),
      });
      expect(await readdir(backups)).not.toContain("never");
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it("copies a store of another format whole, and warns that this version will not start on it", async () => {
    const cli = cliFor(service);
    const later = path.join(backups, "later");
    await cli.json(["backup", "--to", later]);
    // What a later version writes as it migrates the records (store.ts, STORE_FORMAT).
    const records = open({ path: path.join(later, "records"), maxDbs: 32 });
    await records.openDB<unknown, string>({ name: "meta" }).put("format", 2);
    await records.close();

    const report = await cliFor(service, { CONSENT_DATA_DIR: later }).json([
      "backup",
      "--to",
      path.join(backups, "of-later"),
    ]);
    expect(report.files[0]).toEqual({ file: "records/data.mdb", bytes: expect.any(Number) });
    expect(report.warnings).toEqual([
      "a daemon of this version will not start on the backup: its records are marked as format 2, written by another version of the service; this version reads format 1; restore it with the version that wrote it",
    ]);

    // A store written before the marker existed has no meta database at all: backed up as ever.
    const older = open({ path: path.join(later, "records"), maxDbs: 32 });
    await older.openDB<unknown, string>({ name: "meta" }).drop();
    await older.close();
    const ofOlder = await cliFor(service, { CONSENT_DATA_DIR: later }).json([
      "backup",
      "--to",
      path.join(backups, "of-older"),
    ]);
    expect(ofOlder.warnings).toEqual([]);
  });
});
