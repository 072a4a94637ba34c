import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import { deliveryId } from "#daemon/webhooks/webhook-store.js";
import { http, mintKey } from "#test/support/api.js";
import { aChoice, bannerFixture, postLog } from "#test/support/consent-log.js";
import { startService as startServiceProgram, useProgramRoot } from "#test/support/processes.js";
import type { TestService } from "#test/support/service.js";
import { eventually, NEVER, WebhookReceiver } from "#test/support/webhook-receiver.js";

const WEBHOOK_SCOPES = ["banners:read", "banners:write", "webhooks:read", "webhooks:write"];
/** One daemon + gateway process per `npm start`, so a SIGKILL leaves no worker behind. */
const SERVICE_ENV = { CONSENT_WORKERS: "1", CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" };

/** Start-up and delivery on a two-core runner shared with other test files can take a while. */
const SLOW_MS = 60_000;
/** A short drain limit (CONSENT_DRAIN_TIMEOUT_MS), far below a hanging attempt's 15 s. */
const DRAIN_MS = 2_000;
/** What a program may take to exit after its drain's limit: closing the store, flushing its log. */
const AFTER_CUT_MS = 1_500;
/** Well inside the default lease (60 s) a claim left to run out would hold a delivery for. */
const RESEND_WITHIN_MS = 20_000;

/** `npm start` on `dataDir`, allowed SLOW_MS to print its URLs. */
const startService = (dataDir: string, env: Record<string, string>) =>
  startServiceProgram(dataDir, env, { startupMs: SLOW_MS });

/** The delivery ids a daemon logged as delivered (debug level), from its stdout. */
function deliveredBy(stdout: string): string[] {
  return stdout.split("\n").flatMap((line) => {
    try {
      const entry = JSON.parse(line) as { msg?: string; deliveryId?: string };
      return entry.msg === "webhook delivered" ? [String(entry.deliveryId)] : [];
    } catch {
      return []; // not a log line (the start-up banner), or the last line still incomplete
    }
  });
}

/** Webhook delivery with the real programs: a daemon that dies mid-delivery, two daemons on one store. */
describe("webhook delivery across daemon processes", { timeout: 240_000 }, () => {
  const dirs = useProgramRoot("consent-webhook-processes-");
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
  });
  // Each test starts with a receiver that answers, whatever the one before left it doing.
  beforeEach(() => {
    receiver.answer = () => ({ status: 200, body: "ok" });
  });
  // useProgramRoot stops the programs.
  afterAll(() => receiver.stop());

  /** A team with a banner and one endpoint at the receiver; returns the endpoint's secret. */
  async function subscribe(service: TestService) {
    const fixture = await bannerFixture(service);
    const { key } = await mintKey(service, fixture.teamId, { scopes: WEBHOOK_SCOPES });
    const created = await http(service, "POST", "/api/v1/webhooks", {
      key,
      body: { url: `${receiver.url}?team=${fixture.teamId}` },
    });
    expect(created.status).toBe(201);
    const { id, secret } = created.body.data.webhook as { id: string; secret: string };
    return { ...fixture, webhookId: id, secret };
  }

  /** The consentLogId of every verified delivery of the endpoint, in arrival order. */
  const verifiedLogIds = (secret: string, from = 0) =>
    receiver.received.slice(from).flatMap((request) => {
      const verifier = new Webhook(secret);
      try {
        const event = verifier.verify(request.body, request.headers as Record<string, string>) as {
          data: { consentLogId: string };
        };
        return [{ logId: event.data.consentLogId, webhookId: request.headers["webhook-id"] }];
      } catch {
        return [];
      }
    });

  it("delivers every event after a daemon killed with SIGKILL mid-delivery restarts", async () => {
    const dataDir = dirs.join("restart");
    // A short lease, so the restarted daemon takes over the dead one's claims without a minute's wait.
    const env = { ...SERVICE_ENV, CONSENT_WEBHOOK_LEASE_MS: "2000" };
    const first = await startService(dataDir, env);
    const team = await subscribe(first.service);
    // The receiver takes the requests and never answers: the daemon holds its claims mid-attempt.
    receiver.answer = () => NEVER;
    const logIds: string[] = [];
    for (let i = 0; i < 5; i++) {
      const posted = await postLog(first.service, aChoice(team.publicId));
      expect(posted.status).toBe(200);
      logIds.push(posted.body.consentLogId);
    }
    const hung = await eventually(
      () => (verifiedLogIds(team.secret).length > 0 ? verifiedLogIds(team.secret) : undefined),
      "an attempt is in flight",
      SLOW_MS,
    );
    await first.program.stop("SIGKILL");

    receiver.answer = () => ({ status: 200, body: "ok" });
    const from = receiver.received.length;
    const second = await startService(dataDir, env);
    const delivered = await eventually(
      () => {
        const got = verifiedLogIds(team.secret, from);
        return logIds.every((id) => got.some((d) => d.logId === id)) ? got : undefined;
      },
      "every event is delivered after the restart",
      SLOW_MS,
    );
    // A re-sent attempt carries the webhook-id of the one cut off by the kill.
    const resent = delivered.find((d) => d.logId === hung[0]?.logId);
    expect(resent?.webhookId).toBe(hung[0]?.webhookId);
    expect(await second.program.stop("SIGTERM")).toBe(0);
  });

  it("exits 0 within CONSENT_DRAIN_TIMEOUT_MS on SIGTERM while an endpoint hangs, and after the restart sends the cut attempt's delivery again at once, recorded delivered once", async () => {
    const dataDir = dirs.join("cut-by-shutdown");
    // The default lease (60 s): a delivery whose claim were left to run out would wait that long.
    // At debug level each daemon logs the deliveries it recorded as delivered.
    const env = {
      ...SERVICE_ENV,
      CONSENT_DRAIN_TIMEOUT_MS: String(DRAIN_MS),
      CONSENT_LOG_LEVEL: "debug",
    };
    const first = await startService(dataDir, env);
    const team = await subscribe(first.service);
    // The receiver reads the request and never answers: the attempt would last its 15 s.
    receiver.answer = () => NEVER;
    const posted = await postLog(first.service, aChoice(team.publicId));
    expect(posted.status).toBe(200);
    const [hung] = await eventually(
      () => {
        const got = verifiedLogIds(team.secret).filter((d) => d.logId === posted.body.consentLogId);
        return got.length > 0 ? got : undefined;
      },
      "the attempt is in flight",
      SLOW_MS,
    );
    const signalledAt = Date.now();
    first.program.child.kill("SIGTERM");
    expect(await first.program.exitWithin(DRAIN_MS + AFTER_CUT_MS)).toBe(0);
    expect(Date.now() - signalledAt).toBeLessThan(DRAIN_MS + AFTER_CUT_MS);
    expect(first.program.stderr()).toBe("");
    expect(first.program.stdout()).toContain(
      "webhook attempts cut by the shutdown: those their endpoints had not answered are due again at once",
    );
    expect(deliveredBy(first.program.stdout())).toEqual([]);

    receiver.answer = () => ({ status: 200, body: "ok" });
    const from = receiver.received.length;
    const second = await startService(dataDir, env);
    // Sent again at the restarted daemon's first passes, not after the cut claim's lease.
    const [resent] = await eventually(
      () => {
        const got = verifiedLogIds(team.secret, from);
        return got.length > 0 ? got : undefined;
      },
      "the delivery is sent again after the restart",
      RESEND_WITHIN_MS,
    );
    // The same webhook-id as the cut attempt's request, which the receiver had read.
    expect(resent).toEqual(hung);
    expect(await second.program.stop("SIGTERM")).toBe(0);
    expect(verifiedLogIds(team.secret, from)).toHaveLength(1);

    // Recorded delivered once, by the restarted daemon, with one attempt: the cut one is not
    // counted, and the endpoint has no failure on record.
    const id = deliveryId(String(hung?.webhookId), team.webhookId);
    expect(deliveredBy(second.program.stdout())).toEqual([id]);
    const store = await openLmdbStore({ dataDir });
    try {
      expect(await store.webhooks.getDelivery(team.teamId, id)).toMatchObject({
        status: "succeeded",
        attempts: 1,
        lastStatusCode: 200,
      });
      const endpoint = await store.webhooks.getEndpoint(team.teamId, team.webhookId);
      expect(endpoint).toMatchObject({ enabled: true });
      expect(endpoint?.failingSince).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it("seals signing secrets anew during an identity-key rotation, so the older key can be dropped and the secrets stay the same", async () => {
    const dataDir = dirs.join("identity-rotation");
    const first = await startService(dataDir, SERVICE_ENV);
    const team = await subscribe(first.service);
    // A secret rotation with a grace period: the previous secret signs too, and is sealed as well.
    const { key } = await mintKey(first.service, team.teamId, { scopes: WEBHOOK_SCOPES });
    const [listed] = (await http(first.service, "GET", "/api/v1/webhooks", { key })).body.data
      .webhooks as { id: string; updatedAt: string }[];
    const rotated = await http(first.service, "PATCH", `/api/v1/webhooks/${listed?.id}`, {
      key,
      body: { rotateSecret: true, secretGracePeriodSeconds: 3600 },
    });
    expect(rotated.status).toBe(200);
    const secrets = [team.secret, rotated.body.data.webhook.secret as string];
    expect(await first.program.stop()).toBe(0);

    // The README's rotation: a new key first, the older one after it, for one start at least.
    const older = (await readFile(path.join(dataDir, "identity-key"), "utf8")).trim();
    const newer = randomBytes(32).toString("base64");
    const rotation = await startService(dataDir, {
      ...SERVICE_ENV,
      CONSENT_IDENTITY_KEY: `${newer},${older}`,
      CONSENT_LOG_LEVEL: "info",
    });
    expect(await rotation.program.stop()).toBe(0);
    const said = rotation.program
      .stdout()
      .split("\n")
      .filter((line) => line.includes("webhook signing secrets"))
      .map((line) => JSON.parse(line) as { msg: string; resealed?: number });
    expect(said).toEqual([
      expect.objectContaining({
        msg: expect.stringContaining("all sealed under the current identity key"),
        resealed: 1,
      }),
    ]);

    // The older key dropped: both secrets still sign, unchanged, and the endpoint reads as before.
    const from = receiver.received.length;
    const dropped = await startService(dataDir, { ...SERVICE_ENV, CONSENT_IDENTITY_KEY: newer });
    const posted = await postLog(dropped.service, aChoice(team.publicId));
    expect(posted.status).toBe(200);
    const delivered = await eventually(
      () => receiver.received.slice(from).find((r) => r.body.includes(posted.body.consentLogId)),
      "the event arrives signed",
      SLOW_MS,
    );
    expect(String(delivered.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    for (const secret of secrets) {
      expect(verifiedLogIds(secret, from).map((d) => d.logId)).toContain(posted.body.consentLogId);
    }
    const read = await http(dropped.service, "GET", `/api/v1/webhooks/${listed?.id}`, { key });
    expect(read.body.data.webhook.updatedAt).toBe(rotated.body.data.webhook.updatedAt);
    expect(await dropped.program.stop()).toBe(0);
  });

  it("two daemons on one data directory deliver each event exactly once", async () => {
    const dataDir = dirs.join("shared");
    // At debug level each daemon logs the deliveries it recorded as delivered.
    const env = { ...SERVICE_ENV, CONSENT_LOG_LEVEL: "debug" };
    const a = await startService(dataDir, env);
    const b = await startService(dataDir, env);
    const team = await subscribe(a.service);
    const from = receiver.received.length;
    const logIds: string[] = [];
    // Pairs of choices, one through each daemon (which wakes that daemon's dispatcher), until
    // both daemons have delivered some: 10 pairs at least, 50 at most.
    const bothDelivered = () =>
      deliveredBy(a.program.stdout()).length > 0 && deliveredBy(b.program.stdout()).length > 0;
    for (let pair = 0; pair < 50 && (pair < 10 || !bothDelivered()); pair++) {
      for (const via of [a.service, b.service]) {
        const posted = await postLog(via, aChoice(team.publicId));
        expect(posted.status).toBe(200);
        logIds.push(posted.body.consentLogId);
      }
    }
    await eventually(
      () => {
        const got = verifiedLogIds(team.secret, from);
        return logIds.every((id) => got.some((d) => d.logId === id)) ? true : undefined;
      },
      "every event is delivered",
      SLOW_MS,
    );
    // Both daemons drain and exit: nothing can be sent after this, so the counts are final.
    expect(await Promise.all([a.program.stop("SIGTERM"), b.program.stop("SIGTERM")])).toEqual([
      0, 0,
    ]);
    const got = verifiedLogIds(team.secret, from);
    const perWebhookId = new Map<string, number>();
    for (const { webhookId } of got) {
      perWebhookId.set(String(webhookId), (perWebhookId.get(String(webhookId)) ?? 0) + 1);
    }
    expect(got).toHaveLength(logIds.length);
    expect(perWebhookId.size).toBe(logIds.length);
    expect([...perWebhookId.values()].every((count) => count === 1)).toBe(true);
    expect(new Set(got.map((d) => d.logId))).toEqual(new Set(logIds));
    // Both daemons took part (each event was posted alternately through each, which wakes that
    // daemon's dispatcher), and no delivery was recorded by both.
    const byA = deliveredBy(a.program.stdout());
    const byB = deliveredBy(b.program.stdout());
    expect(byA.length).toBeGreaterThan(0);
    expect(byB.length).toBeGreaterThan(0);
    expect(new Set([...byA, ...byB]).size).toBe(logIds.length);
    expect(byA.length + byB.length).toBe(logIds.length);
  });
});
