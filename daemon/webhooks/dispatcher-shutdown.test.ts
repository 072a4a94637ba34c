import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:http2";
import { tmpdir } from "node:os";
import path from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sharedSecret } from "#daemon/auth/secrets.js";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import { createDaemon, listenDaemon } from "#daemon/server.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { LEASE_MS, WebhookDispatcher } from "#daemon/webhooks/dispatcher.js";
import { appendConsentLog } from "#daemon/webhooks/outbox.js";
import { RETRY_DELAYS_MS } from "#daemon/webhooks/retry-schedule.js";
import { generateWebhookSecret, WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { anEndpoint } from "#daemon/webhooks/webhook-store.contract.js";
import { deliveryId, eventIdOf } from "#daemon/webhooks/webhook-store.js";
import { eventually, NEVER, WebhookReceiver } from "#test/support/webhook-receiver.js";

/** How long after the stop the attempts still in flight are cut, as a short drain would. */
const CUT_AFTER_MS = 300;

/**
 * A dispatcher stopped by a shutdown while its endpoint hangs (docs/webhooks.md, "Shutdown"): over
 * the real embedded store and a receiver on 127.0.0.1 that takes the request and never answers.
 */
describe("webhook attempts cut by a shutdown", () => {
  let dataDir: string;
  let store: Store;
  let receiver: WebhookReceiver;
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);
  const secrets = new WebhookSecretBox([Buffer.alloc(32, 7)]);
  const lines: { level: number; msg: string; attempts?: number }[] = [];
  /** Called with each line as it is written, inside the logging call. */
  let onLine: ((line: { msg: string }) => void) | undefined;
  const logger = pino(
    { level: "info" },
    {
      write: (text: string) => {
        const line = JSON.parse(text);
        lines.push(line);
        onLine?.(line);
      },
    },
  );
  const dispatchers: WebhookDispatcher[] = [];

  const aDispatcher = (box = secrets) => {
    const dispatcher = new WebhookDispatcher({
      store,
      clock,
      guard: new AddressGuard(["127.0.0.1/32"]),
      secrets: box,
      logger,
      pollIntervalMs: 50,
    });
    dispatchers.push(dispatcher);
    dispatcher.start();
    return dispatcher;
  };

  /** A new team's endpoint at the receiver, its secret sealed in `box`, stored. */
  const aStoredEndpoint = async (box = secrets) => {
    const teamId = randomUUID();
    const endpoint = {
      ...anEndpoint(teamId, clock()),
      url: `${receiver.url}?team=${teamId}`,
      sealedSecret: box.seal(generateWebhookSecret()),
    };
    expect(await store.webhooks.insertEndpoint(endpoint)).toBe(true);
    return { teamId, endpoint };
  };

  /** A running dispatcher whose one attempt, to a new endpoint that never answers, hangs. */
  const aHangingAttempt = async () => {
    const { teamId, endpoint } = await aStoredEndpoint();
    const deliveryOf = (row: { id: string }) =>
      store.webhooks.getDelivery(teamId, deliveryId(eventIdOf(row.id), endpoint.id));
    receiver.answer = () => NEVER;
    const dispatcher = aDispatcher();
    const hung = aConsentLogRow(teamId, clock());
    await appendConsentLog(store, hung);
    await eventually(
      () => (receiver.received.length === 1 ? true : undefined),
      "the attempt hangs",
    );
    return { teamId, deliveryOf, dispatcher, hung };
  };

  beforeEach(async () => {
    lines.length = 0;
    onLine = undefined;
    offsetMs = 0;
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-dispatcher-shutdown-"));
    store = await openLmdbStore({ dataDir });
    receiver = await new WebhookReceiver().start();
  });
  afterEach(async () => {
    await Promise.all(dispatchers.splice(0).map((dispatcher) => dispatcher.stop()));
    await receiver.stop();
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("gives the delivery back due at once, its attempts and the endpoint's failure record as before the cut, and another dispatcher sends it at once", async () => {
    const { teamId, endpoint } = await aStoredEndpoint();
    const row = aConsentLogRow(teamId, clock());
    const id = deliveryId(eventIdOf(row.id), endpoint.id);
    const delivery = () => store.webhooks.getDelivery(teamId, id);
    const failingSince = async () =>
      (await store.webhooks.getEndpoint(teamId, endpoint.id))?.failingSince;

    // A first attempt fails: one attempt counted, the endpoint failing since then.
    receiver.answer = () => ({ status: 500, body: "down" });
    const first = aDispatcher();
    await appendConsentLog(store, row);
    const failed = await eventually(
      async () => ((await delivery())?.attempts === 1 ? delivery() : undefined),
      "the first attempt is recorded",
    );
    expect(failed).toMatchObject({ status: "pending", lastStatusCode: 500 });
    const since = await eventually(failingSince, "the endpoint's failure record");

    // Its retry falls due and hangs: the request is read and never answered.
    receiver.answer = () => NEVER;
    offsetMs += RETRY_DELAYS_MS[0] * 2;
    await eventually(
      () => (receiver.received.length === 2 ? true : undefined),
      "the retry is sent",
    );
    const stoppedAt = Date.now();
    await first.stop({ cutAfterMs: CUT_AFTER_MS });
    // Cut at its time, not at the attempt's 15 s bound.
    expect(Date.now() - stoppedAt).toBeLessThan(CUT_AFTER_MS + 2_000);
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: "webhook attempts cut by the shutdown: those their endpoints had not answered are due again at once",
        attempts: 1,
      }),
    );

    // As if the cut attempt had not been made: the first attempt's outcome, due, unleased.
    const given = await delivery();
    expect(given).toMatchObject({
      status: "pending",
      attempts: 1,
      lastStatusCode: 500,
      lastError: failed?.lastError,
      lastAttemptAt: failed?.lastAttemptAt,
      lastResponseExcerpt: "down",
    });
    expect(given?.leaseOwner).toBeUndefined();
    expect(given?.leaseUntil).toBeUndefined();
    expect(given?.nextAttemptAt?.getTime()).toBeLessThanOrEqual(clock().getTime());
    expect(given?.succeededAt).toBeUndefined();
    expect(await failingSince()).toEqual(since);

    // Another dispatcher claims it at its first pass, well before a lease (LEASE_MS) could end.
    receiver.answer = () => ({ status: 200, body: "ok" });
    aDispatcher();
    const delivered = await eventually(
      async () => ((await delivery())?.status === "succeeded" ? delivery() : undefined),
      "the delivery is sent again and delivered",
      LEASE_MS / 10,
    );
    expect(delivered).toMatchObject({ attempts: 2, lastStatusCode: 200 });
    // The endpoint's run of failures ends with the delivery, in a write made after the delivery's.
    await eventually(
      async () => ((await failingSince()) === undefined ? true : undefined),
      "the endpoint's failure record is cleared",
    );
    // The same webhook-id every time: the cut attempt's request, read by the receiver, and its resend.
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual([
      eventIdOf(row.id),
      eventIdOf(row.id),
      eventIdOf(row.id),
    ]);
  });

  it("stops at once, cutting nothing, when no attempt is in flight", async () => {
    const dispatcher = aDispatcher();
    const stoppedAt = Date.now();
    await dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
    expect(Date.now() - stoppedAt).toBeLessThan(CUT_AFTER_MS);
    // The cut's time passes after the stop: nothing is cut, nothing said.
    await new Promise((resolve) => setTimeout(resolve, CUT_AFTER_MS * 2));
    expect(lines.filter((line) => line.msg.includes("cut by the shutdown"))).toEqual([]);
  });

  // Regression: a stop with a cut, asked once the dispatcher had stopped, left its cut timer
  // running: it kept the process alive that long, and then cut the attempts of a dispatcher
  // started again meanwhile.
  it("sets no cut for a stop asked once it has stopped: attempts made after a restart run on", async () => {
    const { teamId, endpoint } = await aStoredEndpoint();
    const dispatcher = aDispatcher();
    await dispatcher.stop();
    await dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
    receiver.answer = () => NEVER;
    dispatcher.start();
    const row = aConsentLogRow(teamId, clock());
    await appendConsentLog(store, row);
    await eventually(
      () => (receiver.received.length === 1 ? true : undefined),
      "the attempt is sent",
    );
    await new Promise((resolve) => setTimeout(resolve, CUT_AFTER_MS * 2));
    expect(lines.filter((line) => line.msg.includes("cut by the shutdown"))).toEqual([]);
    // Still in flight, its lease this dispatcher's, its attempt not counted yet.
    const delivery = await store.webhooks.getDelivery(
      teamId,
      deliveryId(eventIdOf(row.id), endpoint.id),
    );
    expect(delivery).toMatchObject({ status: "pending", attempts: 0 });
    expect(delivery?.leaseOwner).toBeDefined();
    // Its own stop's cut ends it, rather than the attempt's 15 s bound.
    await dispatcher.stop({ cutAfterMs: 0 });
  });

  // Regression: a stop with a cut, asked while a stop awaited the end of its own cut (its timer
  // already cleared), set a timer that nothing cleared: it kept the process alive that long, and
  // then cut the attempts of the dispatcher started again meanwhile.
  it("sets no cut for a stop asked as the stop's own cut ends: attempts made after a restart run on", async () => {
    const { teamId, deliveryOf, dispatcher, hung } = await aHangingAttempt();
    // The cut's line is written once its attempt is given back, as the stop awaits the cut's end.
    let askedDuringCut: Promise<void> | undefined;
    onLine = (line) => {
      if (line.msg.includes("cut by the shutdown")) {
        askedDuringCut = dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
      }
    };
    await dispatcher.stop({ cutAfterMs: 0 });
    await askedDuringCut;
    expect(askedDuringCut).toBeDefined();
    onLine = undefined;
    lines.length = 0;

    // Started again: the given-back delivery and a new one are both in flight past that cut's time.
    dispatcher.start();
    const after = aConsentLogRow(teamId, clock());
    await appendConsentLog(store, after);
    await eventually(
      () => (receiver.received.length === 3 ? true : undefined),
      "both attempts are sent",
    );
    await new Promise((resolve) => setTimeout(resolve, CUT_AFTER_MS * 2));
    expect(lines.filter((line) => line.msg.includes("cut by the shutdown"))).toEqual([]);
    for (const row of [hung, after]) {
      const delivery = await deliveryOf(row);
      expect(delivery).toMatchObject({ status: "pending", attempts: 0 });
      expect(delivery?.leaseOwner).toBeDefined();
    }
    await dispatcher.stop({ cutAfterMs: 0 });
  });

  // Regression: a start asked while a stop was still waiting on an attempt ran a second loop
  // beside the stopping one, which then never ended, and the stop's end marked the restarted
  // dispatcher stopped: its own later stop set no cut, leaving a hanging attempt to its 15 s bound.
  it("starts again once a stop under way has ended: the restarted dispatcher delivers, and its own stop's cut applies", async () => {
    const { teamId, deliveryOf, dispatcher, hung } = await aHangingAttempt();
    const stopping = dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
    const starting = dispatcher.start();
    const stoppedAt = Date.now();
    await stopping;
    expect(Date.now() - stoppedAt).toBeLessThan(CUT_AFTER_MS + 2_000);
    await starting;

    // Running again: the given-back delivery and a new event are both sent.
    receiver.answer = () => ({ status: 200 });
    const after = aConsentLogRow(teamId, clock());
    await appendConsentLog(store, after);
    for (const row of [hung, after]) {
      await eventually(
        async () => ((await deliveryOf(row))?.status === "succeeded" ? true : undefined),
        "the delivery is sent and delivered",
      );
    }

    // Its next stop cuts a hanging attempt at its time, not at the attempt's 15 s bound.
    receiver.answer = () => NEVER;
    const last = aConsentLogRow(teamId, clock());
    await appendConsentLog(store, last);
    await eventually(
      () => (receiver.received.length === 4 ? true : undefined),
      "the last attempt hangs",
    );
    lines.length = 0;
    const lastStopAt = Date.now();
    await dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
    expect(Date.now() - lastStopAt).toBeLessThan(CUT_AFTER_MS + 2_000);
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: expect.stringContaining("cut by the shutdown"), attempts: 1 }),
    );
    expect(await deliveryOf(last)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("a start then a stop asked during a stop leave the dispatcher stopped: nothing is claimed after", async () => {
    const { teamId, endpoint } = await aStoredEndpoint();
    receiver.answer = () => NEVER;
    const dispatcher = aDispatcher();
    await appendConsentLog(store, aConsentLogRow(teamId, clock()));
    await eventually(
      () => (receiver.received.length === 1 ? true : undefined),
      "the attempt hangs",
    );
    const stopping = dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
    const starting = dispatcher.start();
    await Promise.all([stopping, dispatcher.stop(), starting]);
    const row = aConsentLogRow(teamId, clock());
    await appendConsentLog(store, row);
    await new Promise((resolve) => setTimeout(resolve, CUT_AFTER_MS));
    expect(receiver.received).toHaveLength(1);
    expect(
      await store.webhooks.getDelivery(teamId, deliveryId(eventIdOf(row.id), endpoint.id)),
    ).toBeNull();
  });

  // Regression: the cut's log line counted every attempt still exchanging at the cut, including
  // one whose status had arrived, its body still being read, which is recorded with that status.
  it("counts as cut only the attempts whose endpoints had not answered; one whose status had arrived is recorded with it", async () => {
    const { teamId, endpoint } = await aStoredEndpoint();
    const [answered, unanswered] = [
      aConsentLogRow(teamId, clock()),
      aConsentLogRow(teamId, clock()),
    ];
    const deliveryOf = (row: { id: string }) =>
      store.webhooks.getDelivery(teamId, deliveryId(eventIdOf(row.id), endpoint.id));
    // One endpoint answers 200 and never ends its body; the other request is never answered.
    receiver.answer = (request) =>
      request.headers["webhook-id"] === eventIdOf(answered.id)
        ? { status: 200, body: "o", unfinished: true }
        : NEVER;
    const dispatcher = aDispatcher();
    await appendConsentLog(store, answered);
    await appendConsentLog(store, unanswered);
    await eventually(
      () => (receiver.received.length === 2 ? true : undefined),
      "both attempts are in flight",
    );
    await dispatcher.stop({ cutAfterMs: CUT_AFTER_MS });
    expect(lines.filter((line) => line.msg.includes("cut by the shutdown"))).toEqual([
      expect.objectContaining({ attempts: 1 }),
    ]);
    expect(await deliveryOf(answered)).toMatchObject({
      status: "succeeded",
      attempts: 1,
      lastStatusCode: 200,
    });
    expect(await deliveryOf(unanswered)).toMatchObject({ status: "pending", attempts: 0 });
  });

  it("starts no attempt once the daemon's drain begins: a record acknowledged during the drain is delivered by the next daemon at once, its attempt the only one", async () => {
    const operatorToken = `consent_op_${randomUUID()}`;
    // The daemon's own sealing key: without identity keys, the operator token's (createDaemon).
    const daemonSecrets = new WebhookSecretBox([
      sharedSecret(() => null, operatorToken, "consent.v1 webhook secrets"),
    ]);
    const { teamId, endpoint } = await aStoredEndpoint(daemonSecrets);
    const [before, during] = [aConsentLogRow(teamId, clock()), aConsentLogRow(teamId, clock())];
    const deliveryOf = (row: { id: string }) =>
      store.webhooks.getDelivery(teamId, deliveryId(eventIdOf(row.id), endpoint.id));
    // The attempt in flight as the drain begins hangs; any other is answered at once.
    receiver.answer = (request) =>
      request.headers["webhook-id"] === eventIdOf(before.id) ? NEVER : { status: 200 };
    const daemon = createDaemon({
      store,
      operatorToken,
      identityKeys: [],
      baseUrl: "http://127.0.0.1",
      logger,
      clock,
      load: { busy: () => false },
      webhooks: { allowCidrs: ["127.0.0.1/32"], pollIntervalMs: 50 },
    });
    const drainTimeoutMs = 2_000;
    const { app, port } = await listenDaemon(daemon, {
      host: "127.0.0.1",
      port: 0,
      logger,
      drainTimeoutMs,
    });
    await appendConsentLog(store, before);
    await eventually(
      () => (receiver.received.length === 1 ? true : undefined),
      "the attempt hangs",
    );

    // A health watch, a call that runs until the drain tells it to end, holds the drain open.
    const session = connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    const call = session.request({
      ":method": "POST",
      ":path": "/grpc.health.v1.Health/Watch",
      "content-type": "application/connect+proto",
    });
    call.on("error", () => {});
    call.end(Buffer.alloc(5));
    await new Promise((resolve) => call.once("data", resolve));
    const drainedAt = Date.now();
    const closing = app.close();
    // A record acknowledged during the drain (a call still in flight) puts its event in the outbox.
    await new Promise((resolve) => setImmediate(resolve));
    await appendConsentLog(store, during);
    await closing;
    session.destroy();
    expect(Date.now() - drainedAt).toBeLessThan(drainTimeoutMs + 2_000);
    expect(lines.filter((line) => line.level >= 50)).toEqual([]);

    // Nothing was sent during the drain: the event waits in the outbox unclaimed, the cut
    // delivery is due at once and unleased.
    expect(receiver.received.map((r) => r.headers["webhook-id"])).toEqual([eventIdOf(before.id)]);
    expect(await deliveryOf(during)).toBeNull();
    const given = await deliveryOf(before);
    expect(given).toMatchObject({ status: "pending", attempts: 0 });
    expect(given?.leaseOwner).toBeUndefined();

    // The next daemon on the store sends both at its first pass, well before a lease could end.
    receiver.answer = () => ({ status: 200 });
    aDispatcher(daemonSecrets);
    for (const row of [before, during]) {
      const delivered = await eventually(
        async () => ((await deliveryOf(row))?.status === "succeeded" ? deliveryOf(row) : undefined),
        "the delivery is sent and delivered",
        LEASE_MS / 10,
      );
      expect(delivered).toMatchObject({ attempts: 1, lastStatusCode: 200 });
    }
    // The event of the record acknowledged during the drain reached the receiver once.
    expect(
      receiver.received.filter((r) => r.headers["webhook-id"] === eventIdOf(during.id)),
    ).toHaveLength(1);
  });
});
