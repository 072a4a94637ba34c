import type { FastifyInstance, FastifyRequest } from "fastify";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendData } from "#gateway/envelope.js";
import { isoTime } from "#gateway/json.js";
import { type Relay, rawBody, readOptions, relayOptions } from "#gateway/relay.js";
import { routePath } from "#gateway/v1/methods.js";
import type { Webhook } from "#gen/consent/v1/webhook_pb.js";

const idOf = (request: FastifyRequest) => (request.params as { id: string }).id;

/** decisions §8: the Webhook shape; `secret` only in the response that created or rotated it. */
export function webhookJson(webhook: Webhook | undefined): Record<string, unknown> | undefined {
  if (!webhook) return undefined;
  return {
    id: webhook.id,
    url: webhook.url,
    eventTypes: webhook.eventTypes,
    bannerIds: webhook.bannerIds,
    enabled: webhook.enabled,
    description: webhook.description,
    createdAt: isoTime(webhook.createdAt),
    updatedAt: isoTime(webhook.updatedAt),
    ...(webhook.secret && { secret: webhook.secret }),
    disabledReason: webhook.disabledReason || null,
    disabledAt: isoTime(webhook.disabledAt) ?? null,
    failingSince: isoTime(webhook.failingSince) ?? null,
    previousSecretExpiresAt: isoTime(webhook.previousSecretExpiresAt) ?? null,
  };
}

/** decisions §8: webhook endpoints, by API key (webhooks:read / webhooks:write). */
export function webhookRoutes(app: FastifyInstance, clients: DaemonClients, relay: Relay): void {
  routePath(app, "/webhooks", "key", {
    async GET(request, reply) {
      const { webhooks } = await clients.webhooks.listWebhooks(
        {},
        readOptions(request, reply, relay),
      );
      return sendData(reply, 200, { webhooks: webhooks.map(webhookJson) });
    },
    async POST(request, reply) {
      const { webhook } = await clients.webhooks.createWebhook(
        { json: rawBody(request) },
        relayOptions(request, reply, relay),
      );
      return sendData(reply, 201, { webhook: webhookJson(webhook) });
    },
  });

  routePath(app, "/webhooks/:id", "key", {
    async GET(request, reply) {
      const { webhook } = await clients.webhooks.getWebhook(
        { id: idOf(request) },
        readOptions(request, reply, relay),
      );
      return sendData(reply, 200, { webhook: webhookJson(webhook) });
    },
    async PATCH(request, reply) {
      const { webhook } = await clients.webhooks.updateWebhook(
        { id: idOf(request), json: rawBody(request) },
        relayOptions(request, reply, relay),
      );
      return sendData(reply, 200, { webhook: webhookJson(webhook) });
    },
    async DELETE(request, reply) {
      const { deleted } = await clients.webhooks.deleteWebhook(
        { id: idOf(request) },
        relayOptions(request, reply, relay),
      );
      return sendData(reply, 200, { deleted });
    },
  });
}
