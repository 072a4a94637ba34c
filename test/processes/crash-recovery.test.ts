import { readFileSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { aChoice, ipSource, postLog } from "#test/support/consent-log.js";
import { startService, useProgramRoot, workerPids } from "#test/support/processes.js";
import type { TestService } from "#test/support/service.js";
import { eventually, WebhookReceiver } from "#test/support/webhook-receiver.js";

/** Requests in flight at every moment of the load. */
const IN_FLIGHT = 16;
/** The load runs until at least this much is acknowledged, then the service is killed. */
const LOG_POSTS = 200;
const SUBJECT_WRITES = 50;
/** Writes per subject, each on the version the one before acknowledged (spec 3.2). */
const WRITES_PER_SUBJECT = 3;

/**
 * Two workers, X-Forwarded-For trusted so each log post is its own client (spec 8: 1,000 a minute
 * per IP), loopback deliveries allowed, and a short webhook lease so the restarted service takes
 * over the claims the killed one held without a minute's wait (docs/webhooks.md, "Leases").
 */
const SERVICE_ENV = {
  CONSENT_WORKERS: "2",
  CONSENT_TRUST_PROXY: "127.0.0.1",
  CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32",
  CONSENT_WEBHOOK_LEASE_MS: "2000",
};

/** Two workers print their URLs later than one process, and later still on a busy two-core machine. */
const start = (dataDir: string) => startService(dataDir, SERVICE_ENV, { startupMs: 40_000 });

/** Whether `pid` has ended: gone, or a zombie its new parent has not reaped yet. */
function ended(pid: number): boolean {
  try {
    return / Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\)/, ""));
  } catch {
    return true;
  }
}

/** Every consent-log row of the banner, through ConsentLogService, page after page. */
async function storedRows(service: TestService, key: string, publicId: string) {
  const logs = createClient(ConsentLogService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  const rows = new Map<string, { marketing: boolean | undefined }>();
  let pageToken = "";
  do {
    const page = await logs.listConsentLogs(
      { bannerId: publicId, pageSize: 1_000, pageToken },
      { headers: { authorization: `Bearer ${key}` } },
    );
    for (const entry of page.entries) {
      rows.set(entry.consentLogId, { marketing: entry.preferences.marketing });
    }
    pageToken = page.nextPageToken;
  } while (pageToken);
  return rows;
}

/**
 * "Nothing acknowledged is ever lost" when `npm start` dies without a drain (a SIGKILL, an OOM
 * kill, a power cut of the processes): every 200 follows a durable write (decisions §5: the log
 * row and its consent.given outbox entry commit together; spec 3.2: a subject write's version;
 * docs/behaviour.md: each write is durable before its answer). shutdown.test.ts covers SIGTERM.
 */
describe("SIGKILL on npm start with two workers under load", { timeout: 120_000 }, () => {
  const dirs = useProgramRoot("consent-crash-");
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
  });
  // useProgramRoot stops the programs.
  afterAll(() => receiver.stop());

  it("keeps every acknowledged log row, subject version and consent.given event after a restart", async () => {
    const dataDir = dirs.join("data");
    const first = await start(dataDir);
    const teamId = await createTeam(first.service, "business");
    const { key } = await mintKey(first.service, teamId);
    const { publicId } = await createBanner(first.service, key);
    const subscribed = await http(first.service, "POST", "/api/v1/webhooks", {
      key,
      body: { url: receiver.url, eventTypes: ["consent.given"] },
    });
    expect(subscribed.status).toBe(201);
    const secret = subscribed.body.data.webhook.secret as string;

    /** consentLogId → the `marketing` choice it was posted with, for every 200. */
    const acknowledgedRows = new Map<string, boolean>();
    /** subjectId → the highest version a PUT of it was answered 200 with. */
    const acknowledgedVersions = new Map<string, number>();
    let subjectWrites = 0;
    let killed = false;
    let enough: () => void = () => {};
    const loaded = new Promise<void>((resolve) => {
      enough = resolve;
    });
    const nextIp = ipSource();

    /**
     * One client: three explicit choices, then one write of its current subject, over and over
     * until the kill. Each subject is written by one client only, so a 409 is a failure too. A
     * request the kill cuts off ends the client; anything other than a 200 before it fails the test.
     */
    async function client(index: number) {
      let subject = 0;
      let version = 0;
      for (let n = 0; !killed; n++) {
        try {
          if (n % 4 === 3) {
            const subjectId = `crash-${index}-${subject}`;
            const written = await http(first.service, "PUT", "/api/v1/consent/subjects/state", {
              key,
              body: {
                bannerId: publicId,
                subjectId,
                baseVersion: version,
                // The state names its own version: a resolve shows which write it holds.
                consentState: consentState({ revision: version + 1 }),
              },
            });
            if (written.status !== 200) throw new Error(`PUT ${written.status}: ${written.text}`);
            version = written.body.data.version;
            acknowledgedVersions.set(subjectId, version);
            subjectWrites += 1;
            if (version === WRITES_PER_SUBJECT) {
              subject += 1;
              version = 0;
            }
          } else {
            const marketing = n % 2 === 0;
            const posted = await postLog(
              first.service,
              aChoice(publicId, {
                preferences: { necessary: true, analytics: false, marketing },
              }),
              { ip: nextIp() },
            );
            if (posted.status !== 200) throw new Error(`log ${posted.status}: ${posted.text}`);
            acknowledgedRows.set(posted.body.consentLogId, marketing);
          }
        } catch (error) {
          // fetch's own failure (a TypeError): the connection was refused, reset or cut mid-answer.
          if (killed && error instanceof TypeError) return;
          throw error;
        }
        if (acknowledgedRows.size >= LOG_POSTS && subjectWrites >= SUBJECT_WRITES) enough();
      }
    }
    const clients = Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => client(i)));
    // A client failing before the kill fails the test at once.
    await Promise.race([loaded, clients]);
    expect(first.program.stderr()).toBe("");

    // The primary and both workers at once, with requests in flight: no drain, no close.
    const workers = workerPids(first.program);
    expect(workers).toHaveLength(2);
    killed = true;
    for (const pid of workers) process.kill(pid, "SIGKILL");
    const primaryExit = first.program.stop("SIGKILL");
    await clients;
    await primaryExit;
    await eventually(() => (workers.every(ended) ? true : undefined), "both workers have ended");

    const second = await start(dataDir);
    const health = await http(second.service, "GET", "/api/v1/health");
    expect([health.status, health.body?.data]).toEqual([200, { status: "ok" }]);

    // Every acknowledged choice is stored, as it was posted.
    const rows = await storedRows(second.service, key, publicId);
    const lostRows = [...acknowledgedRows]
      .filter(([id, marketing]) => rows.get(id)?.marketing !== marketing)
      .map(([id]) => ({ id, stored: rows.get(id) ?? "missing" }));
    expect(lostRows).toEqual([]);

    // Every subject resolves at its acknowledged version or the one after it (a write in flight
    // at the kill may have committed unanswered), holding the state written with that version.
    const resolved = await Promise.all(
      [...acknowledgedVersions].map(async ([subjectId, acknowledged]) => {
        const answer = await http(second.service, "POST", "/api/v1/consent/subjects/resolve", {
          key,
          body: { bannerId: publicId, subjectId },
        });
        const { found, version, consentState: state } = answer.body?.data ?? {};
        return { subjectId, acknowledged, status: answer.status, found, version, state };
      }),
    );
    const lostVersions = resolved.filter(
      (r) =>
        r.status !== 200 ||
        !r.found ||
        r.version < r.acknowledged ||
        r.version > r.acknowledged + 1 ||
        r.state?.revision !== r.version,
    );
    expect(lostVersions).toEqual([]);

    // The outbox is durable: every acknowledged choice's consent.given reaches the endpoint,
    // before the kill or after the restart (at least once: deduplicated on webhook-id).
    const verifier = new Webhook(secret);
    const deliveredIds = () =>
      new Set(
        receiver.received.map(
          (request) =>
            (
              verifier.verify(request.body, request.headers as Record<string, string>) as {
                data: { consentLogId: string };
              }
            ).data.consentLogId,
        ),
      );
    await eventually(
      () => {
        const delivered = deliveredIds();
        return [...acknowledgedRows.keys()].every((id) => delivered.has(id)) ? true : undefined;
      },
      "every acknowledged choice's consent.given is delivered",
      15_000,
    );

    // The store opened cleanly after the kill: nothing on stderr, no warning or error logged.
    expect(second.program.stderr()).toBe("");
    expect(second.program.stdout()).not.toMatch(/"level":(4|5|6)0/);
    expect(await second.program.stop()).toBe(0);
  });
});
