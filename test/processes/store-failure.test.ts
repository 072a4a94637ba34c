import { open, stat, statfs } from "node:fs/promises";
import path from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { cliFor, runCli } from "#cli/test-support/cli-process.js";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import {
  consentState,
  createBanner,
  createTeam,
  http,
  mintKey,
  operator,
  rawHttp,
} from "#test/support/api.js";
import { aChoice, ipSource, postLog } from "#test/support/consent-log.js";
import { startService, storeWithSubjectState, useProgramRoot } from "#test/support/processes.js";
import type { TestService } from "#test/support/service.js";

/** Room the embedded store may grow into past its size after start-up, in KiB. */
const ROOM_KB = 256;

/**
 * A write the disk refuses (here the file size limit; in production a full disk or an I/O error)
 * fails that request in the spec's error shape, and the service keeps serving everything else.
 */
describe("npm start when the disk refuses a write", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-disk-");

  it("answers 500 for the refused write and stays up", async () => {
    const dataDir = dirs.join("data");
    // A first start creates the store; the second runs with little room left to grow it.
    const { key, publicId } = await storeWithSubjectState(dataDir);
    const sizeKb = Math.ceil((await stat(path.join(dataDir, "records", "data.mdb"))).size / 1024);

    const { program, service } = await startService(
      dataDir,
      { CONSENT_TRUST_PROXY: "127.0.0.1" },
      { fileSizeKb: sizeKb + ROOM_KB },
    );
    const nextIp = ipSource();
    const pageUrl = `https://shop.example.com/${"p".repeat(1_500)}`;
    let refused: Awaited<ReturnType<typeof postLog>> | undefined;
    const acknowledged: string[] = [];
    for (let batch = 0; batch < 100 && !refused; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          postLog(service, aChoice(publicId, { pageUrl }), { ip: nextIp() }),
        ),
      );
      for (const answer of answers) {
        if (answer.status === 200) acknowledged.push(answer.body.consentLogId);
      }
      refused = answers.find((answer) => answer.status !== 200);
    }
    expect(acknowledged.length).toBeGreaterThan(0);
    expect(refused?.status).toBe(500);
    // The log route's own error shape (decisions §5).
    expect(refused?.body).toMatchObject({ success: false, error: "Internal server error" });
    expect(JSON.stringify(refused?.body)).not.toMatch(/EFBIG|Commit failed|at .*\.js/);

    // Still serving: reads answer, the process has not exited, and it stops cleanly.
    expect(await program.exitWithin(500)).toBe("still running");
    const listed = await http(service, "GET", "/api/v1/banners", { key });
    expect(listed.status).toBe(200);
    expect(program.stderr()).not.toMatch(/Unhandled|unhandledRejection/i);
    expect(await program.stop()).toBe(0);

    // With room again: every acknowledged choice is stored, and nothing refused is.
    const again = await startService(dataDir);
    const logs = createClient(
      ConsentLogService,
      createGrpcTransport({ baseUrl: again.service.daemonUrl }),
    );
    const { entries } = await logs.listConsentLogs(
      { bannerId: publicId, pageSize: 1_000 },
      { headers: { authorization: `Bearer ${key}` } },
    );
    expect(new Set(entries.map((entry) => entry.consentLogId))).toEqual(new Set(acknowledged));
    expect(await again.program.stop()).toBe(0);
  });

  it("refuses writes while the disk has less room than CONSENT_MIN_FREE_MB, says so once, serves reads, and still revokes and erases", async () => {
    const dataDir = dirs.join("guarded");
    const { key, keyId, publicId } = await storeWithSubjectState(dataDir);

    // A minimum above what this disk has free: the guard refuses from the start.
    const disk = await statfs(dataDir);
    const minFreeMb = Math.ceil((disk.bavail * disk.bsize) / 1024 ** 2) + 1024;
    const { program, service } = await startService(dataDir, {
      CONSENT_MIN_FREE_MB: String(minFreeMb),
      CONSENT_TRUST_PROXY: "127.0.0.1",
      CONSENT_LOG_LEVEL: "info",
    });
    const logged = await postLog(service, aChoice(publicId));
    expect(logged.status).toBe(500);
    expect(logged.body).toMatchObject({ success: false, error: "Internal server error" });
    const put = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { bannerId: publicId, subjectId: "s-1", baseVersion: 0, consentState: consentState() },
    });
    expect(put.status).toBe(500);
    expect(put.body).toMatchObject({
      data: { error: "Internal server error", code: "internal_error" },
    });
    expect(JSON.stringify(put.body)).not.toMatch(/MB free|CONSENT_MIN_FREE_MB/);

    const listed = await http(service, "GET", "/api/v1/banners", { key });
    expect(listed.status).toBe(200);
    expect(listed.body.data.banners).toHaveLength(1);
    // A visitor's erasure and an operator's revocation do not wait for room.
    const erased = await http(service, "DELETE", "/api/v1/consent/subjects/state", {
      key,
      body: { bannerId: publicId, subjectId: "s-1" },
    });
    expect(erased.status).toBe(200);
    expect(erased.body.data).toEqual({ success: true, deleted: 0 });
    const keptRef = { bannerId: publicId, subjectId: "kept" };
    const erasedKept = await http(service, "DELETE", "/api/v1/consent/subjects/state", {
      key,
      body: keptRef,
    });
    expect(erasedKept.body.data).toEqual({ success: true, deleted: 1 });
    const gone = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: keptRef,
    });
    expect(gone.body.data).toEqual({ found: false });
    const { admin, auth } = operator(service);
    expect((await admin.revokeApiKey({ id: keyId }, auth)).apiKey?.revokedAt).toBeDefined();
    // The operator's health check says so: exit 1, with what to do.
    const [json, human, doctor] = await Promise.all([
      runCli(["health", "--daemon", service.daemonUrl, "--json"]),
      runCli(["health", "--daemon", service.daemonUrl]),
      runCli(["doctor", "--daemon", service.daemonUrl, "--json"]),
    ]);
    expect(JSON.parse(doctor.stdout).checks).toContainEqual({
      name: "store",
      status: "fail",
      detail: expect.stringMatching(/^the store refuses writes: /),
      hint: expect.stringContaining("CONSENT_MIN_FREE_MB"),
    });
    expect([json.code, JSON.parse(json.stdout)]).toMatchObject([
      1,
      { daemon: { reachable: true, status: "SERVING" }, store: { ok: true, acceptsWrites: false } },
    ]);
    expect(human.code).toBe(1);
    expect(human.stdout).toMatch(
      /Store\s+the store refuses writes: the data directory's disk is low on free space \(CONSENT_MIN_FREE_MB/,
    );
    // A write the operator makes is told why, not sent to a log that has no line for it.
    const refused = await cliFor({ ...service, dataDir }).fails([
      "teams",
      "create",
      "--name",
      "Later",
      "--plan",
      "free",
    ]);
    expect(refused).toEqual({
      error:
        "The store refuses writes: the data directory's disk is low on free space (CONSENT_MIN_FREE_MB; reads are served).",
      code: "store_full",
      hint: expect.stringContaining("free space on that disk"),
    });
    const afterRevocation = await http(service, "GET", "/api/v1/banners", { key });
    expect(afterRevocation.status).toBe(401);
    // One line for the operator, not one per refused write.
    const output = program.stdout() + program.stderr();
    expect(
      output.match(/below CONSENT_MIN_FREE_MB \(\d+ MB\): the embedded store refuses writes/g),
    ).toHaveLength(1);
    expect(output).not.toMatch(/unexpected error in RPC handler|request failed|StoreFullError/);
    expect(await program.stop()).toBe(0);
  });
});

/**
 * Damage deeper in the files than start-up reads (lmdb-preflight.ts reads each root): the service
 * starts and serves, the first request that meets a damaged page fails, and from then on health
 * says the service is unavailable, whichever worker answers.
 */
describe("npm start on a store damaged past its roots", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-damaged-");

  it("turns health to 503 in every worker once a request meets a damaged page, and says so once", async () => {
    const dataDir = dirs.join("data");
    const { key, publicId } = await storeWithManyRows(dataDir);
    // A disk fault in the middle of the records file: pages the roots do not show.
    await zeroRecordsPages(dataDir, 0.4, 0.6);

    const { program, service } = await startService(dataDir, { CONSENT_WORKERS: "2" });
    // A new connection each time, so the primary hands the checks to both workers in turn.
    const health = healthOf(service);
    for (let i = 0; i < 4; i++) expect(await health()).toEqual([200, "ok"]);

    const failure = await listWholeLog(service, key, publicId);
    expect(String(failure)).toMatch(/internal/i);
    expect(String(failure)).not.toMatch(/MDB_/);

    for (let i = 0; i < 6; i++) expect(await health()).toEqual([503, "unavailable"]);
    // The log (stdout): once, from the worker that met it, with LMDB's own words.
    const said = program.stdout().match(/the embedded store in .* is damaged \(MDB_\w+/g);
    expect(said).toHaveLength(1);
    expect(program.stdout()).toContain("restore the directory from a backup");
    expect(await program.stop()).toBe(0);
  });

  it("says so once when the files are damaged while it runs, and does not log each failure that follows", async () => {
    const dataDir = dirs.join("damaged-while-running");
    const { key, publicId } = await storeWithManyRows(dataDir);
    // One worker, so that exactly one process meets the damage (and logs it).
    const { program, service } = await startService(dataDir, { CONSENT_WORKERS: "1" });
    const health = healthOf(service);
    expect(await health()).toEqual([200, "ok"]);

    // The whole file but its two meta pages written over under the running service: every read
    // meets zeroed pages from then on (the main tree's root among them, which each transaction
    // reads), the webhook dispatcher's passes included, wherever the tree put the outbox's pages.
    await zeroRecordsPages(dataDir, 0, 1);
    for (let i = 0; i < 5; i++) {
      expect(String(await listWholeLog(service, key, publicId))).toMatch(/internal/i);
    }
    expect(await health()).toEqual([503, "unavailable"]);
    // The dispatcher's passes (one a second) keep failing meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 3_500));

    const output = program.stdout();
    expect(output.match(/the embedded store in .* is damaged \(MDB_\w+/g)).toHaveLength(1);
    expect(output).not.toContain("unexpected error in RPC handler");
    expect(output.match(/calls that meet a damaged page fail/g)).toHaveLength(1);
    // Once, or once more if the first pass met the damage in other words than those after it.
    const passes = output.match(/webhook dispatch pass failed/g)?.length ?? 0;
    expect([passes >= 1, passes <= 2]).toEqual([true, true]);
    expect(await program.stop()).toBe(0);
  });
});

/**
 * A store holding a team, a key, a banner and enough log rows that they fill most of the records
 * file, the rows written by the store itself; the service is stopped.
 */
async function storeWithManyRows(dataDir: string) {
  const first = await startService(dataDir);
  const { key } = await mintKey(first.service, await createTeam(first.service));
  const { publicId } = await createBanner(first.service, key);
  expect(await first.program.stop()).toBe(0);
  const store = await openLmdbStore({ dataDir });
  const banner = await store.banners.getByPublicId(publicId);
  if (!banner) throw new Error("the banner was not stored");
  await Promise.all(
    Array.from({ length: 3_000 }, () =>
      store.consentLog.append(
        aConsentLogRow(banner.teamId, new Date(), { bannerId: banner.id, publicId }),
      ),
    ),
  );
  await store.close();
  return { key, publicId };
}

/**
 * A disk fault: the records file's pages between two fractions of its size written as zeros,
 * never the two meta pages it opens with (LMDB's own check finds those at start-up).
 */
async function zeroRecordsPages(dataDir: string, fromShare: number, toShare: number) {
  const dataFile = path.join(dataDir, "records", "data.mdb");
  const { size } = await stat(dataFile);
  const page = 4_096;
  const from = Math.max(2 * page, Math.floor((size * fromShare) / page) * page);
  const to = Math.floor((size * toShare) / page) * page;
  const file = await open(dataFile, "r+");
  await file.write(Buffer.alloc(to - from), 0, to - from, from);
  await file.close();
}

/** Health's status code and status, each check on a new connection (so workers take turns). */
function healthOf(service: TestService) {
  return () =>
    rawHttp(service, "GET", "/api/v1/health", { connection: "close" }).then((r) => [
      r.status,
      JSON.parse(r.text).data.status,
    ]);
}

/** Reads the banner's whole log page by page over gRPC; the error that stopped it, if any. */
async function listWholeLog(service: TestService, key: string, publicId: string) {
  const logs = createClient(ConsentLogService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  const auth = { headers: { authorization: `Bearer ${key}` } };
  try {
    let pageToken = "";
    do {
      ({ nextPageToken: pageToken } = await logs.listConsentLogs(
        { bannerId: publicId, pageSize: 100, pageToken },
        auth,
      ));
    } while (pageToken);
  } catch (error) {
    return error;
  }
  return undefined;
}
