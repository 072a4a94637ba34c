import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { RETRY_DELAYS_MS } from "#daemon/webhooks/retry-schedule.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { http } from "#test/support/api.js";
import { aChoice, postLog } from "#test/support/consent-log.js";
import { type Answer, eventually } from "#test/support/webhook-receiver.js";
import { subscribe, useDeliveryService } from "#test/support/webhook-subscriber.js";

/** A team with a banner, a webhook key and one endpoint at `path` of the context's receiver. */
function teamsOf(context: ReturnType<typeof useDeliveryService>) {
  return {
    subscribed: (path: string) => subscribe(context.service, `${context.receiver.url}/${path}`),
    deliveriesOf: (teamId: string, webhookId: string) =>
      context.service.store.webhooks.listDeliveries({ teamId, webhookId, limit: 100 }),
  };
}

/**
 * The attempt's bound waited out: a daemon whose attempts and test sends may take 4 s instead of
 * DELIVERY_TIMEOUT_MS (15 s), since what is under test is what the bound does, not its length.
 */
const STALL_BOUND_MS = 4_000;

/**
 * What an attempt's answer does to its delivery and its endpoint (docs/webhooks.md, "Attempts"
 * and "Disabling"), over the real daemon, gateway and a receiver on 127.0.0.1.
 */
describe("webhook attempt outcomes: a body that never ends", () => {
  const context = useDeliveryService({ webhookDeliveryTimeoutMs: STALL_BOUND_MS });
  const { subscribed, deliveriesOf } = teamsOf(context);

  it("counts a 2xx whose body never ends as delivered, for deliveries and test sends alike", {
    timeout: STALL_BOUND_MS + 20_000,
  }, async () => {
    const { service, receiver } = context;
    const team = await subscribed("stalls");
    const previous = receiver.answer;
    // The receiver acknowledges at once, then leaves the response open (a stalled proxy).
    receiver.answer = (request) =>
      request.url.includes(team.teamId)
        ? { status: 200, body: "accepted", unfinished: true }
        : previous(request);
    try {
      const posted = await postLog(service, aChoice(team.publicId));
      const client = createClient(
        WebhookService,
        createGrpcTransport({ baseUrl: service.daemonUrl }),
      );
      const tested = client.testWebhook(
        { id: team.webhook.id },
        { headers: { authorization: `Bearer ${team.key}` } },
      );
      const delivery = await eventually(
        async () => {
          const [d] = await deliveriesOf(team.teamId, team.webhook.id);
          return d && d.attempts > 0 ? d : undefined;
        },
        "the attempt is recorded",
        STALL_BOUND_MS + 5_000,
      );
      expect(delivery).toMatchObject({
        status: "succeeded",
        attempts: 1,
        lastStatusCode: 200,
        lastResponseExcerpt: "accepted",
      });
      expect(delivery.lastError).toBeUndefined();
      expect(await tested).toMatchObject({
        success: true,
        statusCode: 200,
        error: "",
        responseExcerpt: "accepted",
      });
      // Acknowledged once, so never sent again: no retry after the schedule's first wait.
      context.offsetMs += RETRY_DELAYS_MS[0] * 2;
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const sent = receiver.received.filter((r) => r.body.includes(posted.body.consentLogId));
      expect(sent).toHaveLength(1);
      const shown = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
        key: team.key,
      });
      expect(shown.body.data.webhook).toMatchObject({ enabled: true, failingSince: null });
    } finally {
      receiver.answer = previous;
    }
  });
});

describe("webhook attempt outcomes", () => {
  const context = useDeliveryService();
  const { subscribed, deliveriesOf } = teamsOf(context);

  it("leaves an endpoint whose url changed during an attempt enabled when the old url answers 410, and retries at the new url", async () => {
    const { service, receiver } = context;
    const team = await subscribed("old");
    const previous = receiver.answer;
    let answerOld: (answer: Answer) => void = () => {};
    receiver.answer = (request) =>
      request.url.startsWith(`${new URL(receiver.url).pathname}/old?team=${team.teamId}`)
        ? new Promise<Answer>((resolve) => {
            answerOld = resolve;
          })
        : previous(request);
    try {
      const posted = await postLog(service, aChoice(team.publicId));
      const consentLogId = posted.body.consentLogId;
      await eventually(
        () => receiver.received.find((r) => r.url.includes(`/old?team=${team.teamId}`)),
        "the attempt reaches the old url",
      );
      const newUrl = `${receiver.url}/new?team=${team.teamId}`;
      const moved = await http(service, "PATCH", `/api/v1/webhooks/${team.webhook.id}`, {
        key: team.key,
        body: { url: newUrl },
      });
      expect(moved.status).toBe(200);
      // The old receiver, decommissioned, answers the attempt already on its way with 410 Gone.
      answerOld({ status: 410 });
      const recorded = await eventually(async () => {
        const [d] = await deliveriesOf(team.teamId, team.webhook.id);
        return d?.attempts === 1 ? d : undefined;
      }, "the attempt at the old url is recorded");
      expect(recorded).toMatchObject({ status: "pending", lastStatusCode: 410 });
      const shown = await http(service, "GET", `/api/v1/webhooks/${team.webhook.id}`, {
        key: team.key,
      });
      expect(shown.body.data.webhook).toMatchObject({
        url: newUrl,
        enabled: true,
        disabledReason: null,
        disabledAt: null,
        failingSince: null,
      });
      context.offsetMs += RETRY_DELAYS_MS[0] * 2;
      const delivered = await eventually(
        () =>
          receiver.received.find(
            (r) => r.url.includes(`/new?team=${team.teamId}`) && r.body.includes(consentLogId),
          ),
        "the retry reaches the new url",
      );
      expect(
        new Webhook(team.webhook.secret).verify(
          delivered.body,
          delivered.headers as Record<string, string>,
        ),
      ).toMatchObject({ type: "consent.given", data: { consentLogId } });
      const [done] = await eventually(async () => {
        const found = await deliveriesOf(team.teamId, team.webhook.id);
        return found[0]?.status === "succeeded" ? found : undefined;
      }, "the delivery is recorded as succeeded");
      expect(done?.attempts).toBe(2);
    } finally {
      receiver.answer = previous;
    }
  });
});
