import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { open } from "lmdb";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aConsentLogRow } from "#daemon/consent-log/consent-log-store.contract.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { RECORDS_DIRECTORY } from "#daemon/store/lmdb-files.js";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { FAILING_DISABLE_AFTER_MS } from "#daemon/webhooks/delivery-attempt.js";
import { LEASE_MS } from "#daemon/webhooks/dispatcher.js";
import { LEASE_INDEX_MARK } from "#daemon/webhooks/lmdb-webhook-store.js";
import { consentGivenBody } from "#daemon/webhooks/outbox.js";
import {
  FULL_SPEED,
  MAX_YIELD_MS,
  RESERVED_FOR_NEW_TEAMS,
  YIELD_WINDOW_MS,
  YIELDING,
} from "#daemon/webhooks/pass-limits.js";
import { JITTER, RETRY_DELAYS_MS } from "#daemon/webhooks/retry-schedule.js";
import { signature } from "#daemon/webhooks/signing.js";
import { ATTEMPTS_PER_ENDPOINT, MAX_IN_FLIGHT } from "#daemon/webhooks/webhook-sender.js";
import { MAX_TESTS_PER_TEAM } from "#daemon/webhooks/webhook-service.js";
import { type DeliveryRecord, deliveryId, eventIdOf } from "#daemon/webhooks/webhook-store.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { createTeam, http, mintKey } from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import { grpcFrame, rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";
import { failureOf } from "#test/support/stand-in-daemon.js";
import { eventually, NEVER, WebhookReceiver } from "#test/support/webhook-receiver.js";
import {
  startDeliveryService,
  subscribe,
  WEBHOOK_SCOPES,
} from "#test/support/webhook-subscriber.js";

/**
 * How long a test waits for what must happen while attempts hang: well before their 15 s timeout
 * would free the slots they hold (and so let it happen anyway).
 */
const BEFORE_TIMEOUTS_MS = 5_000;

describe("Standard Webhooks signing", () => {
  it("matches the specification's published test vector", () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    expect(
      signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}'),
    ).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });
});

/** spec 6 and docs/webhooks.md over the real daemon, gateway and a real receiver on 127.0.0.1. */
describe("consent.given delivery", () => {
  let service: TestService;
  let receiver: WebhookReceiver;
  let close: () => Promise<void>;
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);

  beforeAll(async () => {
    ({ service, receiver, close } = await startDeliveryService(clock));
  });
  afterAll(() => close());

  const subscribed = (body: Record<string, unknown> = {}) => subscribe(service, receiver.url, body);

  /** A new team's choice reaches the receiver (while other attempts hang). */
  async function anotherTeamDelivers(timeoutMs?: number) {
    const team = await subscribed();
    const posted = await postLog(service, aChoice(team.publicId));
    await eventually(
      () => receiver.received.find((r) => r.body.includes(posted.body.consentLogId)),
      "another team's event arrives meanwhile",
      timeoutMs,
    );
  }

  const deliveriesOf = (teamId: string, webhookId: string) =>
    service.store.webhooks.listDeliveries({ teamId, webhookId, limit: 100 });

  it("delivers each explicit choice once, signed, and nothing for a default-state row", async () => {
    const team = await subscribed();
    expect(team.webhook).toMatchObject({
      eventTypes: ["consent.given"],
      bannerIds: [],
      enabled: true,
    });
    expect(team.webhook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const before = receiver.received.length;
    expect(
      (await postLog(service, aChoice(team.publicId, { method: "consent_default" }))).status,
    ).toBe(200);
    const posted = await postLog(service, aChoice(team.publicId, { country: "DE", gpc: true }));
    const consentLogId = posted.body.consentLogId;
    const delivered = await eventually(
      () => receiver.received.slice(before).find((r) => r.body.includes(consentLogId)),
      "the event reaches the receiver",
    );
    const verified = new Webhook(team.webhook.secret).verify(
      delivered.body,
      delivered.headers as Record<string, string>,
    );
    expect(verified).toMatchObject({
      type: "consent.given",
      data: {
        consentLogId,
        bannerId: team.publicId,
        method: "consent_given",
        preferences: { necessary: true, analytics: true, marketing: false },
        country: "DE",
        gpc: true,
      },
    });
    const data = JSON.parse(delivered.body).data;
    expect(Object.keys(data).sort()).toEqual(
      [
        "bannerId",
        "consentId",
        "consentLogId",
        "country",
        "gpc",
        "languageCode",
        "matchedRuleId",
        "method",
        "occurredAt",
        "preferences",
        "purposeChoices",
        "region",
        "revision",
        "services",
      ].sort(),
    );
    expect(delivered.headers["webhook-id"]).toBe(`evt_${consentLogId.replaceAll("-", "")}`);
    const deliveries = await eventually(async () => {
      const found = await deliveriesOf(team.teamId, team.webhook.id);
      return found.every((d) => d.status === "succeeded") ? found : undefined;
    }, "the delivery is recorded as succeeded");
    // One delivery: the default-state row emitted nothing.
    expect(deliveries).toHaveLength(1);
  });

  it("signs with both secrets during a rotation's grace period", async () => {
    const team = await subscribed();
    const rotated = await http(service, "PATCH", `/api/v1/webhooks/${team.webhook.id}`, {
      key: team.key,
      body: { rotateSecret: true, secretGracePeriodSeconds: 3600 },
    });
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.data.webhook.secret;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(team.webhook.secret);
    const posted = await postLog(service, aChoice(team.publicId));
    const delivered = await eventually(
      () => receiver.received.find((r) => r.body.includes(posted.body.consentLogId)),
      "the event arrives",
    );
    expect(String(delivered.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    for (const secret of [team.webhook.secret, newSecret]) {
      expect(
        new Webhook(secret).verify(delivered.body, delivered.headers as Record<string, string>),
      ).toBeTruthy();
    }
    const got = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
      key: team.key,
    });
    expect(got.body.data.webhook.secret).toBeUndefined();
  });

  it("signs with the new secret alone once the grace period is over, and drops the old one at the endpoint's next write", async () => {
    const team = await subscribed();
    const rotated = await http(service, "PATCH", `/api/v1/webhooks/${team.webhook.id}`, {
      key: team.key,
      body: { rotateSecret: true, secretGracePeriodSeconds: 60 },
    });
    const newSecret = rotated.body.data.webhook.secret;
    expect(rotated.body.data.webhook.previousSecretExpiresAt).not.toBeNull();
    offsetMs += 61_000;
    const got = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
      key: team.key,
    });
    expect(got.body.data.webhook.previousSecretExpiresAt).toBeNull();
    // The attempt fails, so the dispatcher writes the endpoint (its failingSince).
    const previous = receiver.answer;
    receiver.answer = (request) =>
      request.body.includes(team.publicId) ? { status: 500 } : previous(request);
    const posted = await postLog(service, aChoice(team.publicId));
    const delivered = await eventually(
      () => receiver.received.find((r) => r.body.includes(posted.body.consentLogId)),
      "the event arrives",
    );
    const id = String(delivered.headers["webhook-id"]);
    const timestamp = Number(delivered.headers["webhook-timestamp"]);
    expect(delivered.headers["webhook-signature"]).toBe(
      signature(newSecret, id, timestamp, delivered.body),
    );
    const stored = await eventually(async () => {
      const endpoint = await service.store.webhooks.getEndpoint(team.teamId, team.webhook.id);
      return endpoint?.failingSince ? endpoint : undefined;
    }, "the failed attempt is recorded on the endpoint");
    expect(stored).not.toHaveProperty("sealedPreviousSecret");
    expect(stored).not.toHaveProperty("previousSecretExpiresAt");
    receiver.answer = previous;
  });

  it("refuses a replay since a time outside google.protobuf.Timestamp's range", async () => {
    const team = await subscribed();
    const client = createClient(
      WebhookService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const replay = client.replayDeliveries(
      {
        webhookId: team.webhook.id,
        since: { ...timestampFromDate(new Date()), seconds: 10n ** 15n },
      },
      { headers: { authorization: `Bearer ${team.key}` } },
    );
    const refused = await replay.then(
      () => undefined,
      (error: unknown) => ConnectError.from(error),
    );
    expect(refused).toMatchObject({
      code: Code.InvalidArgument,
      rawMessage: "Request validation failed",
    });
    const [info] = refused?.findDetails(ErrorInfoSchema) ?? [];
    expect([info?.code, info?.details.map(({ field, message }) => ({ field, message }))]).toEqual([
      "invalid_request",
      [
        {
          field: "since",
          message: "since must be a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z",
        },
      ],
    ]);
  });

  it("test-sends to a disabled endpoint, while a replay to it is refused", async () => {
    const team = await subscribed();
    const disabled = await http(service, "PATCH", `/api/v1/webhooks/${team.webhook.id}`, {
      key: team.key,
      body: { enabled: false },
    });
    expect(disabled.body.data.webhook.enabled).toBe(false);
    const client = createClient(
      WebhookService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const auth = { headers: { authorization: `Bearer ${team.key}` } };
    const outcome = await client.testWebhook({ id: team.webhook.id }, auth);
    expect(outcome).toMatchObject({ success: true, statusCode: 200 });
    const sent = receiver.received.find((r) => r.headers["webhook-id"] === outcome.eventId);
    expect(JSON.parse(sent?.body ?? "{}")).toMatchObject({
      type: "webhook.test",
      data: { webhookId: team.webhook.id },
    });
    const replay = client.replayDeliveries(
      { webhookId: team.webhook.id, since: timestampFromDate(new Date(0)) },
      auth,
    );
    await expect(replay).rejects.toMatchObject({ code: Code.FailedPrecondition });
  });

  it("ends a test send at the caller's deadline with DEADLINE_EXCEEDED, not after the endpoint's 15 s", async () => {
    const team = await subscribed();
    const previous = receiver.answer;
    receiver.answer = () => NEVER;
    try {
      // A raw gRPC call, so the deadline is the server's to keep, not the client's to enforce.
      const id = Buffer.from(team.webhook.id);
      const message = Buffer.concat([Buffer.from([0x0a, id.length]), id]);
      const started = Date.now();
      const answer = await rawRequest(
        service.daemonUrl,
        "/consent.v1.WebhookService/TestWebhook",
        {
          "content-type": "application/grpc",
          te: "trailers",
          "grpc-timeout": "500m",
          authorization: `Bearer ${team.key}`,
        },
        grpcFrame(message),
      );
      expect(answer.trailers["grpc-status"] ?? answer.headers["grpc-status"]).toBe("4");
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      receiver.answer = previous;
    }
  });

  // Regression: test sends had no bound but the key's rate limit, each holding a connection of
  // its own for up to 15 s: one team's burst of tests to an endpoint that hangs held hundreds.
  it(`keeps at most ${MAX_TESTS_PER_TEAM} test sends of a team in flight, refusing one more with RESOURCE_EXHAUSTED`, async () => {
    const team = await subscribed();
    const other = await subscribed();
    const previous = receiver.answer;
    const hanging = `team=${team.teamId}`;
    receiver.answer = (request) => (request.url.includes(hanging) ? NEVER : previous(request));
    const client = createClient(
      WebhookService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const auth = { headers: { authorization: `Bearer ${team.key}` } };
    const callers = new AbortController();
    const arrived = () => receiver.received.filter((r) => r.url.includes(hanging)).length;
    try {
      const held = Array.from({ length: MAX_TESTS_PER_TEAM }, () =>
        client
          .testWebhook({ id: team.webhook.id }, { ...auth, signal: callers.signal })
          .catch(() => undefined),
      );
      await eventually(
        () => (arrived() === MAX_TESTS_PER_TEAM ? true : undefined),
        "the team's test sends reach the endpoint and hang there",
      );
      expect(await failureOf(client.testWebhook({ id: team.webhook.id }, auth))).toEqual({
        code: Code.ResourceExhausted,
        errorCode: "rate_limited",
        message: `The team already has ${MAX_TESTS_PER_TEAM} test sends in flight on this daemon; retry once one has ended`,
        retryAfter: "15",
      });
      expect(arrived()).toBe(MAX_TESTS_PER_TEAM);
      // Another team's test is sent meanwhile.
      const others = await client.testWebhook(
        { id: other.webhook.id },
        { headers: { authorization: `Bearer ${other.key}` } },
      );
      expect(others).toMatchObject({ success: true, statusCode: 200 });
      // Once the sends in flight end, the team tests again.
      callers.abort();
      await Promise.all(held);
      receiver.answer = previous;
      await eventually(
        async () =>
          (await client.testWebhook({ id: team.webhook.id }, auth).catch(() => undefined))?.success,
        "a test send once the others ended",
      );
    } finally {
      callers.abort();
      receiver.answer = previous;
    }
  });

  it("retries on failure with the same webhook-id, on the schedule, honouring Retry-After", async () => {
    const team = await subscribed();
    let failures = 0;
    const previous = receiver.answer;
    // The failure comes after 300 ms: the retry's wait counts from the end of the exchange.
    receiver.answer = (request) =>
      request.body.includes(team.publicId) && failures++ < 1
        ? new Promise((resolve) =>
            setTimeout(
              () =>
                resolve({
                  status: 503,
                  headers: { "retry-after": "3600" },
                  body: "x".repeat(1000),
                }),
              300,
            ),
          )
        : previous(request);
    const posted = await postLog(service, aChoice(team.publicId));
    const failed = await eventually(async () => {
      const [d] = await deliveriesOf(team.teamId, team.webhook.id);
      return d?.attempts === 1 ? d : undefined;
    }, "the first attempt fails");
    expect(failed).toMatchObject({ status: "pending", lastStatusCode: 503 });
    expect(failed.lastResponseExcerpt).toHaveLength(256);
    // Retry-After: 3600 asks for longer than the 5 s of the schedule, from the answer's arrival.
    const wait =
      (failed.nextAttemptAt as Date).getTime() - (failed.lastAttemptAt as Date).getTime();
    expect(wait).toBeGreaterThanOrEqual(3_600_300);
    expect(wait).toBeLessThan(3_602_000);
    offsetMs += wait;
    const succeeded = await eventually(async () => {
      const [d] = await deliveriesOf(team.teamId, team.webhook.id);
      return d?.status === "succeeded" ? d : undefined;
    }, "the retry succeeds");
    expect(succeeded.attempts).toBe(2);
    const ids = receiver.received
      .filter((r) => r.body.includes(posted.body.consentLogId))
      .map((r) => r.headers["webhook-id"]);
    expect(ids).toHaveLength(2);
    expect(new Set(ids).size).toBe(1);
    receiver.answer = previous;
  });

  it("retries a delivery that fell due while its failed attempt was still being recorded", async () => {
    const team = await subscribed();
    const previous = receiver.answer;
    let failures = 0;
    receiver.answer = (request) =>
      request.body.includes(team.publicId) && failures++ < 1 ? { status: 503 } : previous(request);
    // The endpoint's failure record (written after the attempt's outcome) waits for the test.
    const webhooks = service.store.webhooks;
    const replaceEndpoint = webhooks.replaceEndpoint;
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    webhooks.replaceEndpoint = async (...args) => {
      await released;
      return replaceEndpoint.apply(webhooks, args);
    };
    try {
      await postLog(service, aChoice(team.publicId));
      await eventually(async () => {
        const [d] = await deliveriesOf(team.teamId, team.webhook.id);
        return d?.attempts === 1 && d.leaseOwner === undefined ? d : undefined;
      }, "the first attempt's outcome is recorded");
      offsetMs += RETRY_DELAYS_MS[0] * 2;
      // The retry is due and claimed while the first attempt is still running.
      await eventually(async () => {
        const [d] = await deliveriesOf(team.teamId, team.webhook.id);
        return d?.leaseOwner !== undefined ? d : undefined;
      }, "the retry is claimed");
      release();
      const succeeded = await eventually(
        async () => {
          const [d] = await deliveriesOf(team.teamId, team.webhook.id);
          return d?.status === "succeeded" ? d : undefined;
        },
        "the retry is sent once the first attempt ends, not after the retry's lease",
        5_000,
      );
      expect(succeeded.attempts).toBe(2);
    } finally {
      release();
      webhooks.replaceEndpoint = replaceEndpoint;
      receiver.answer = previous;
    }
  });

  // The clock moves on by days from here: deliveries are signed with the moved clock.
  it("follows 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h with jitter, then keeps a dead letter that replays", async () => {
    const team = await subscribed();
    const previous = receiver.answer;
    let down = true;
    receiver.answer = (request) =>
      down && request.body.includes(team.publicId) ? { status: 500 } : previous(request);
    await postLog(service, aChoice(team.publicId));
    let last: DeliveryRecord | undefined;
    for (let attempt = 1; attempt <= RETRY_DELAYS_MS.length + 1; attempt++) {
      last = await eventually(async () => {
        const [d] = await deliveriesOf(team.teamId, team.webhook.id);
        return d?.attempts === attempt ? d : undefined;
      }, `attempt ${attempt}`);
      const delay = RETRY_DELAYS_MS[attempt - 1];
      if (delay === undefined) break;
      const wait = (last.nextAttemptAt as Date).getTime() - (last.lastAttemptAt as Date).getTime();
      expect(wait).toBeGreaterThanOrEqual(delay * (1 - JITTER) - 1);
      expect(wait).toBeLessThanOrEqual(delay * (1 + JITTER) + 1);
      offsetMs += wait;
    }
    expect(last).toMatchObject({ status: "failed", attempts: 8, lastStatusCode: 500 });
    down = false;
    const replay = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
      key: team.key,
    });
    expect(replay.body.data.webhook.enabled).toBe(true);
    const { replayed } = await service.store.webhooks
      .replay(team.teamId, team.webhook.id, { failedSince: new Date(0) }, clock())
      .then((n) => ({ replayed: n }));
    expect(replayed).toBe(1);
    await eventually(async () => {
      const [d] = await deliveriesOf(team.teamId, team.webhook.id);
      return d?.status === "succeeded" ? d : undefined;
    }, "the replayed delivery succeeds");
    receiver.answer = previous;
  });

  it("delivers after the receiver comes back up", async () => {
    const team = await subscribed();
    await receiver.stop();
    const posted = await postLog(service, aChoice(team.publicId));
    const failed = await eventually(async () => {
      const [d] = await deliveriesOf(team.teamId, team.webhook.id);
      return d?.attempts === 1 ? d : undefined;
    }, "the attempt against the closed port fails");
    expect(failed.lastError).toMatch(/ECONNREFUSED/);
    await receiver.start();
    offsetMs += RETRY_DELAYS_MS[0] * 2;
    await eventually(
      () => receiver.received.find((r) => r.body.includes(posted.body.consentLogId)),
      "the event arrives once the receiver is back",
    );
  });

  it("disables an endpoint that answers 410 Gone and shows why", async () => {
    const team = await subscribed();
    const previous = receiver.answer;
    receiver.answer = (request) =>
      request.body.includes(team.publicId) ? { status: 410 } : previous(request);
    await postLog(service, aChoice(team.publicId));
    const shown = await eventually(async () => {
      const got = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
        key: team.key,
      });
      return got.body.data.webhook.enabled === false ? got.body.data.webhook : undefined;
    }, "the endpoint is disabled");
    expect(shown.disabledReason).toBe("the endpoint answered 410 Gone");
    const [delivery] = await deliveriesOf(team.teamId, team.webhook.id);
    expect(delivery?.status).toBe("failed");
    receiver.answer = previous;
  });

  it("disables an endpoint whose every attempt failed for 5 days", async () => {
    const team = await subscribed();
    const previous = receiver.answer;
    receiver.answer = (request) =>
      request.body.includes(team.publicId) ? { status: 500 } : previous(request);
    await postLog(service, aChoice(team.publicId));
    await eventually(async () => {
      const [d] = await deliveriesOf(team.teamId, team.webhook.id);
      return d?.attempts === 1 ? d : undefined;
    }, "the first attempt fails");
    offsetMs += FAILING_DISABLE_AFTER_MS;
    await postLog(service, aChoice(team.publicId));
    const shown = await eventually(async () => {
      const got = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
        key: team.key,
      });
      return got.body.data.webhook.enabled === false ? got.body.data.webhook : undefined;
    }, "the endpoint is disabled");
    expect(shown.disabledReason).toMatch(/^every attempt failed for 5 days/);
    receiver.answer = previous;
  });

  it("sends one endpoint's deliveries over a kept-alive connection", async () => {
    // An endpoint of its own: no other test's retries reach it.
    const own = await new WebhookReceiver().start();
    try {
      const team = await subscribed({ url: own.url });
      for (let i = 0; i < 5; i++) {
        const posted = await postLog(service, aChoice(team.publicId));
        await eventually(
          () => own.received.find((r) => r.body.includes(posted.body.consentLogId)),
          `choice ${i} arrives`,
        );
      }
      // One after the other: the first opens a connection, the others reuse it.
      expect(own.received).toHaveLength(5);
      expect(own.connections).toBe(1);
    } finally {
      await own.stop();
    }
  });

  it("keeps delivering to other endpoints while one endpoint hangs", async () => {
    const hanging = await new WebhookReceiver().start();
    hanging.answer = () => NEVER;
    try {
      const stuck = await subscribed({ url: hanging.url });
      // More choices than one endpoint may have attempts in flight (one per connection).
      const choices = ATTEMPTS_PER_ENDPOINT + 4;
      for (let i = 0; i < choices; i++) await postLog(service, aChoice(stuck.publicId));
      await eventually(
        () => (hanging.received.length >= ATTEMPTS_PER_ENDPOINT ? true : undefined),
        "the hanging endpoint holds as many attempts as it has connections",
      );
      await anotherTeamDelivers();
      // The hanging attempts are still open (none has timed out: no attempt is recorded), and
      // the other four wait their turn in the store, unclaimed: never more in flight to one
      // endpoint, nor queued behind its connections.
      expect(hanging.received).toHaveLength(ATTEMPTS_PER_ENDPOINT);
      expect(hanging.connections).toBe(ATTEMPTS_PER_ENDPOINT);
      const held = await deliveriesOf(stuck.teamId, stuck.webhook.id);
      expect(held).toHaveLength(choices);
      expect(held.every((d) => d.attempts === 0 && d.status === "pending")).toBe(true);
      expect(held.filter((d) => d.leaseOwner !== undefined)).toHaveLength(ATTEMPTS_PER_ENDPOINT);
    } finally {
      await hanging.stop();
    }
  });

  /**
   * A team with an endpoint at each of `urls` (receivers that never answer) and more choices than
   * one endpoint may have attempts in flight.
   */
  async function hangingTeam(urls: string[]) {
    const team = await subscribed({ url: urls[0] });
    for (const url of urls.slice(1)) {
      const created = await http(service, "POST", "/api/v1/webhooks", {
        key: team.key,
        body: { url },
      });
      expect(created.status).toBe(201);
    }
    // Each choice is a delivery to every endpoint: more than the team may have in flight.
    for (let i = 0; i < ATTEMPTS_PER_ENDPOINT; i++) await postLog(service, aChoice(team.publicId));
    return team;
  }

  it("gives one team at most half the attempt slots, however many endpoints of it hang", async () => {
    const hanging = await Promise.all([0, 1, 2].map(() => new WebhookReceiver().start()));
    for (const receiver of hanging) receiver.answer = () => NEVER;
    try {
      // Every choice is a delivery to each of the three endpoints: 3 × 32 could be in flight.
      await hangingTeam(hanging.map((receiver) => receiver.url));
      const inFlight = () => hanging.reduce((sum, receiver) => sum + receiver.received.length, 0);
      await eventually(
        () => (inFlight() >= FULL_SPEED.perTeam ? true : undefined),
        "the team's endpoints hold the team's share of the slots",
      );
      await anotherTeamDelivers(BEFORE_TIMEOUTS_MS);
      expect(inFlight()).toBe(FULL_SPEED.perTeam);
    } finally {
      await Promise.all(hanging.map((receiver) => receiver.stop()));
    }
  });

  it("never makes a team wait for the connections of another team's endpoint on the same host", async () => {
    // One receiving service for many teams: the same host and port, a path each.
    const shared = await new WebhookReceiver().start();
    shared.answer = (request) => (request.url.includes("hang") ? NEVER : { status: 200 });
    try {
      await hangingTeam([`${shared.url}?hang=1`, `${shared.url}?hang=2`]);
      await eventually(
        () => (shared.received.length >= FULL_SPEED.perTeam ? true : undefined),
        "the hanging team holds its share of the slots, all on one host",
      );
      const team = await subscribe(service, shared.url);
      const posted = await postLog(service, aChoice(team.publicId));
      await eventually(
        () => shared.received.find((r) => r.body.includes(posted.body.consentLogId)),
        "the other team's event arrives on a connection of its own",
        BEFORE_TIMEOUTS_MS,
      );
    } finally {
      await shared.stop();
    }
  });

  it("keeps slots for teams with nothing in flight, however many teams' endpoints hang", async () => {
    const hanging = await Promise.all([0, 1, 2, 3].map(() => new WebhookReceiver().start()));
    for (const receiver of hanging) receiver.answer = () => NEVER;
    try {
      await hangingTeam([hanging[0]?.url ?? "", hanging[1]?.url ?? ""]);
      await hangingTeam([hanging[2]?.url ?? "", hanging[3]?.url ?? ""]);
      const inFlight = () => hanging.reduce((sum, receiver) => sum + receiver.received.length, 0);
      const heldBack = MAX_IN_FLIGHT - RESERVED_FOR_NEW_TEAMS;
      await eventually(
        () => (inFlight() >= heldBack ? true : undefined),
        "two hanging teams hold every slot but the reserve",
      );
      await anotherTeamDelivers(BEFORE_TIMEOUTS_MS);
      expect(inFlight()).toBe(heldBack);
    } finally {
      await Promise.all(hanging.map((receiver) => receiver.stop()));
    }
  });

  it("delivers only the banners an endpoint filters on", async () => {
    const team = await subscribed();
    const other = await http(service, "POST", "/api/v1/banners", {
      key: team.key,
      body: { name: "Other", domain: "shop.example.com", configuration: {} },
    });
    const filtered = await http(service, "POST", "/api/v1/webhooks", {
      key: team.key,
      body: { url: receiver.url, bannerIds: [other.body.data.banner.publicId] },
    });
    expect(filtered.status).toBe(201);
    await postLog(service, aChoice(team.publicId));
    await eventually(async () => {
      const found = await deliveriesOf(team.teamId, team.webhook.id);
      return found.length === 1 ? found : undefined;
    }, "the unfiltered endpoint gets a delivery");
    expect(await deliveriesOf(team.teamId, filtered.body.data.webhook.id)).toEqual([]);
  });
});

/** docs/webhooks.md "Under load": deliveries yield to the calls that saturate the daemon. */
describe("delivery under load", () => {
  let service: TestService;
  let busy = true;
  let offsetMs = 0;
  const clock = () => new Date(Date.now() + offsetMs);

  beforeAll(async () => {
    service = await startTestService({
      gateway: true,
      clock,
      env: { CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" },
      load: { busy: () => busy },
    });
  });
  afterAll(() => service.close());

  /** Posts more choices than a yielding dispatcher attempts at once to one endpoint, which hangs. */
  async function holdAttempts(hanging: WebhookReceiver) {
    hanging.answer = () => NEVER;
    const team = await subscribe(service, hanging.url);
    const choices = YIELDING.perEndpoint + 4;
    for (let i = 0; i < choices; i++) await postLog(service, aChoice(team.publicId));
    await eventually(
      () => (hanging.received.length >= YIELDING.perEndpoint ? true : undefined),
      "the yielding dispatcher's attempts arrive",
    );
    // Several passes later, still no more than a yielding dispatcher keeps in flight to one
    // endpoint; the others wait in the store, unleased.
    await new Promise((resolve) => setTimeout(resolve, 5 * YIELD_WINDOW_MS));
    expect(hanging.received).toHaveLength(YIELDING.perEndpoint);
    const held = await service.store.webhooks.listDeliveries({
      teamId: team.teamId,
      webhookId: team.webhook.id,
      limit: 100,
    });
    expect(held).toHaveLength(choices);
    expect(held.filter((d) => d.leaseOwner !== undefined)).toHaveLength(YIELDING.perEndpoint);
    return choices;
  }

  /**
   * While busy, holds attempts at a hanging endpoint (holdAttempts); then `release` changes what
   * the dispatcher sees, and every event must be attempted before slots free themselves.
   */
  async function attemptedAfter(release: () => void, what: string) {
    busy = true;
    const hanging = await new WebhookReceiver().start();
    try {
      const choices = await holdAttempts(hanging);
      release();
      await eventually(
        () => (hanging.received.length === choices ? true : undefined),
        what,
        BEFORE_TIMEOUTS_MS,
      );
    } finally {
      await hanging.stop();
    }
  }

  it("keeps few attempts in flight while the daemon is busy, and catches up when it is not", () =>
    attemptedAfter(() => {
      busy = false;
    }, "every event is attempted once the load is gone"));

  it("starts other endpoints' deliveries while yielding, however many attempts hang at one", async () => {
    busy = false;
    const hanging = await new WebhookReceiver().start();
    const other = await new WebhookReceiver().start();
    try {
      hanging.answer = () => NEVER;
      const stuck = await subscribe(service, hanging.url);
      for (let i = 0; i < ATTEMPTS_PER_ENDPOINT; i++)
        await postLog(service, aChoice(stuck.publicId));
      await eventually(
        () => (hanging.received.length === ATTEMPTS_PER_ENDPOINT ? true : undefined),
        "the hanging endpoint holds every connection it may have",
      );
      busy = true;
      const team = await subscribe(service, other.url);
      const posted = await postLog(service, aChoice(team.publicId));
      await eventually(
        () => other.received.find((r) => r.body.includes(posted.body.consentLogId)),
        "another endpoint's event arrives while the dispatcher yields",
        BEFORE_TIMEOUTS_MS,
      );
    } finally {
      await hanging.stop();
      await other.stop();
    }
  });

  it("yields for at most 30 s in a row, then delivers the backlog at full speed", () => {
    expect(MAX_YIELD_MS).toBe(30_000);
    return attemptedAfter(() => {
      offsetMs += MAX_YIELD_MS;
    }, "every event is attempted although the daemon is still busy");
  });
});

describe("SSRF guard", () => {
  let service: TestService;
  let key: string;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    service = await startTestService({ gateway: true });
    const teamId = await createTeam(service);
    key = (await mintKey(service, teamId, { scopes: WEBHOOK_SCOPES })).key;
  });
  afterAll(async () => {
    await service.close();
    await receiver.stop();
  });

  it.each([
    ["http://example.com/hook", /plain http/],
    ["https://10.1.2.3/hook", /private address/],
    ["https://127.0.0.1/hook", /loopback address/],
    ["https://169.254.169.254/latest", /cloud metadata address/],
    ["https://[::1]/hook", /loopback address/],
    ["https://[fd00:ec2::254]/", /cloud metadata address/],
    ["https://[::ffff:192.168.0.1]/", /private address/],
    ["https://[::127.0.0.1]/", /IPv4-compatible IPv6 address/],
    ["https://[::8.8.8.8]/", /IPv4-compatible IPv6 address/],
    ["https://100.64.0.1/", /is a carrier-grade NAT address;/],
    ["https://[fc00::1]/", /is a unique local address;/],
    ["https://0.0.0.0/", /is an unspecified address;/],
    ["ftp://example.com/", /must use https/],
  ])("refuses %s at creation", async (url, message) => {
    const result = await http(service, "POST", "/api/v1/webhooks", { key, body: { url } });
    expect(result.status).toBe(400);
    expect(result.body.data.code).toBe("invalid_request");
    expect(result.body.data.details[0].field).toBe("url");
    expect(result.body.data.details[0].message).toMatch(message);
  });

  it("refuses, at connect time, a host name that resolves to loopback, in the words it uses for a name that resolves nowhere", async () => {
    const url = receiver.url.replace("http://127.0.0.1", "https://localhost");
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body: { url } });
    expect(created.status).toBe(201);
    const tested = await http(service, "GET", `/api/v1/webhooks/${created.body.data.webhook.id}`, {
      key,
    });
    expect(tested.status).toBe(200);
    const { createClient } = await import("@connectrpc/connect");
    const { createGrpcTransport } = await import("@connectrpc/connect-node");
    const { WebhookService } = await import("#gen/consent/v1/webhook_pb.js");
    const client = createClient(
      WebhookService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const outcome = await client.testWebhook(
      { id: created.body.data.webhook.id },
      { headers: { authorization: `Bearer ${key}` } },
    );
    expect(outcome.success).toBe(false);
    // Said without the address it resolved to, and as a name that resolves nowhere is said: the
    // service's DNS view is not the team's to map.
    expect(outcome.error).toBe(
      "localhost resolves to no address this service may reach; webhooks are only delivered to public addresses",
    );
    expect(receiver.received).toHaveLength(0);
    const nowhere = await http(service, "POST", "/api/v1/webhooks", {
      key,
      body: { url: "https://no-such-name.invalid/hook", eventTypes: ["consent.given"] },
    });
    const unknown = await client.testWebhook(
      { id: nowhere.body.data.webhook.id },
      { headers: { authorization: `Bearer ${key}` } },
    );
    expect(unknown.error).toBe(
      "no-such-name.invalid resolves to no address this service may reach; webhooks are only delivered to public addresses",
    );
  });
});

/** README "Clock": a clock set back holds no event or delivery for the size of the step. */
describe("delivery after a restart with the clock set back", () => {
  /**
   * Starts a service on a new data directory, lets `leave` write into its closed store what a
   * daemon left behind (it returns the consent log row whose event must be delivered), restarts
   * the service with its clock an hour behind, and waits for that event at the receiver.
   */
  async function deliveredAfterRestartBehind(
    leave: (
      store: Store,
      team: { teamId: string; publicId: string; webhookId: string },
    ) => Promise<ConsentLogRecord>,
    dataDirPrepared: (dataDir: string) => Promise<void> = async () => {},
  ) {
    const receiver = await new WebhookReceiver().start();
    const dataDir = await mkdtemp(path.join(tmpdir(), "consent-clock-back-"));
    const env = { CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" };
    try {
      const first = await startTestService({ gateway: true, dataDir, env });
      const team = await subscribe(first, receiver.url);
      await first.close();
      const store = await openLmdbStore({ dataDir });
      const row = await leave(store, { ...team, webhookId: team.webhook.id });
      await store.close();
      await dataDirPrepared(dataDir);

      const behind = () => new Date(Date.now() - 3_600_000);
      const restarted = await startTestService({ gateway: true, dataDir, env, clock: behind });
      try {
        await eventually(
          () => receiver.received.find((r) => r.body.includes(row.id)),
          "the event is delivered without waiting out the hour",
          BEFORE_TIMEOUTS_MS,
        );
      } finally {
        await restarted.close();
      }
    } finally {
      await receiver.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  }

  it("takes over at once an event a daemon leased before the clock was set back an hour", async () => {
    await deliveredAfterRestartBehind(async (store, team) => {
      // What the daemon left behind: an event it claimed (leased for LEASE_MS) before it stopped.
      const now = new Date();
      const row = aConsentLogRow(team.teamId, now, { publicId: team.publicId });
      await store.consentLog.append(row, { event: "consent.given" });
      const lease = { owner: "daemon-before-restart", until: new Date(now.getTime() + LEASE_MS) };
      expect(await store.webhooks.claimEvents(lease, now, 10)).toEqual([row]);
      return row;
    });
  });

  it("takes over at once a delivery a version without the lease index leased, on upgrade", async () => {
    await deliveredAfterRestartBehind(
      async (store, team) => {
        // A delivery in flight when that daemon stopped: fanned out under its lease.
        const now = new Date();
        const row = aConsentLogRow(team.teamId, now, { publicId: team.publicId });
        await store.consentLog.append(row, { event: "consent.given" });
        const lease = { owner: "daemon-before-upgrade", until: new Date(now.getTime() + LEASE_MS) };
        expect(await store.webhooks.claimEvents(lease, now, 10)).toEqual([row]);
        const eventId = eventIdOf(row.id);
        const delivery: DeliveryRecord = {
          id: deliveryId(eventId, team.webhookId),
          teamId: team.teamId,
          webhookId: team.webhookId,
          eventId,
          eventType: "consent.given",
          publicId: team.publicId,
          payload: consentGivenBody(row),
          status: "pending",
          attempts: 0,
          createdAt: now,
          nextAttemptAt: now,
          leaseOwner: lease.owner,
          leaseUntil: lease.until,
        };
        expect(await store.webhooks.fanOut(row.id, [delivery])).toEqual([delivery]);
        return row;
      },
      async (dataDir) => {
        // The records as that version left them: no lease index, and nothing marking one built.
        // Both are there to take away: the delivery's lease, and the mark of its index.
        const records = open({ path: path.join(dataDir, RECORDS_DIRECTORY), maxDbs: 32 });
        const leases = records.openDB({ name: "webhook-delivery-leases" });
        const meta = records.openDB({ name: "meta" });
        expect([leases.getCount(), meta.get(LEASE_INDEX_MARK)]).toEqual([1, true]);
        await leases.drop();
        await meta.remove(LEASE_INDEX_MARK);
        await records.close();
      },
    );
  });
});
