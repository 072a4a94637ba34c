import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Authenticator, Authorized } from "#daemon/auth/authenticator.js";
import type { Clock } from "#daemon/clock.js";
import { DomainError, insertWithinMaximum, invalidRequest, notFound } from "#daemon/errors.js";
import { InFlightCounts } from "#daemon/limits/in-flight-counts.js";
import { admission } from "#daemon/rpc/rate-limit-headers.js";
import { bodyOf } from "#daemon/rpc/request-body.js";
import type { Store } from "#daemon/store/store.js";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { signingSecrets } from "#daemon/webhooks/delivery-attempt.js";
import { signedHeaders } from "#daemon/webhooks/signing.js";
import { deliveryMessage, webhookMessage } from "#daemon/webhooks/webhook-messages.js";
import {
  DEFAULT_GRACE_SECONDS,
  MAX_WEBHOOKS_PER_TEAM,
  readDeliveryPaging,
  readReplaySince,
  readWebhookCreation,
  readWebhookUpdate,
  WEBHOOK_BODY_LIMIT,
} from "#daemon/webhooks/webhook-rules.js";
import { generateWebhookSecret, type WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { DELIVERY_TIMEOUT_MS, sendWebhook } from "#daemon/webhooks/webhook-sender.js";
import {
  type WebhookEndpointRecord,
  withoutExpiredPreviousSecret,
} from "#daemon/webhooks/webhook-store.js";
import {
  type CreateWebhookRequest,
  CreateWebhookRequestSchema,
  type UpdateWebhookRequest,
  UpdateWebhookRequestSchema,
  type WebhookService,
} from "#gen/consent/v1/webhook_pb.js";

export interface WebhookServiceOptions {
  store: Store;
  authenticator: Authenticator;
  clock: Clock;
  guard: AddressGuard;
  secrets: WebhookSecretBox;
  /** How long a test send may take; default DELIVERY_TIMEOUT_MS (webhook-sender.ts). */
  deliveryTimeoutMs?: number;
}

const bodyLimit = { maxBytes: WEBHOOK_BODY_LIMIT, failure: "subject" } as const;
const REPLACE_ATTEMPTS = 5;
/**
 * TestWebhook sends of one team one daemon has in flight at once; one more is refused
 * (RESOURCE_EXHAUSTED). Each holds a connection of its own for up to the 15 s timeout, outside
 * the dispatcher's bounds on attempts (64 for a team), so without this a team's burst of tests to
 * an endpoint that hangs would hold as many connections as calls it could send (its key's whole
 * rate-limit window at once).
 */
export const MAX_TESTS_PER_TEAM = 8;
/** What a refused test is told to wait: by then every send in flight has ended (its timeout). */
const TEST_RETRY_SECONDS = Math.ceil(DELIVERY_TIMEOUT_MS / 1000);

/** Whether `next` has the settings of `current`: a PATCH that changes none of them writes nothing. */
function sameSettings(current: WebhookEndpointRecord, next: WebhookEndpointRecord): boolean {
  return (
    next.url === current.url &&
    isDeepStrictEqual(next.eventTypes, current.eventTypes) &&
    isDeepStrictEqual(next.bannerIds, current.bannerIds) &&
    next.description === current.description &&
    next.enabled === current.enabled
  );
}

/** The typed gRPC fields of a create, in the shape of the REST body. */
function typedCreation(request: CreateWebhookRequest): unknown {
  return {
    url: request.url,
    ...(request.eventTypes.length > 0 && { eventTypes: request.eventTypes }),
    ...(request.bannerIds.length > 0 && { bannerIds: request.bannerIds }),
    ...(request.description && { description: request.description }),
  };
}

/** The typed gRPC fields of an update, in the shape of the REST body. */
function typedUpdate(request: UpdateWebhookRequest): unknown {
  return Object.fromEntries(
    Object.entries({
      url: request.url,
      eventTypes: request.eventTypes?.values,
      bannerIds: request.bannerIds?.values,
      description: request.description,
      enabled: request.enabled,
      rotateSecret: request.rotateSecret,
      secretGracePeriodSeconds: request.secretGracePeriodSeconds,
    }).filter(([, value]) => value !== undefined),
  );
}

/** Webhook endpoints and their deliveries (spec 1.4 and 6, decisions §8). */
export function createWebhookService(
  options: WebhookServiceOptions,
): ServiceImpl<typeof WebhookService> {
  const { store, authenticator, clock, guard, secrets, deliveryTimeoutMs } = options;

  const admitted = admission(authenticator, { read: "webhooks:read", write: "webhooks:write" });
  /** TestWebhook sends in flight on this daemon, by team. */
  const testsByTeam = new InFlightCounts();

  async function ownEndpoint(auth: Authorized, id: string): Promise<WebhookEndpointRecord> {
    const endpoint = await store.webhooks.getEndpoint(auth.team.id, id);
    if (!endpoint) throw notFound("No webhook with that id on this team");
    return endpoint;
  }

  /** Every listed banner must be one of the team's (by public id). */
  async function checkBanners(auth: Authorized, publicIds: readonly string[] | undefined) {
    for (const [index, publicId] of (publicIds ?? []).entries()) {
      const banner = await store.banners.getByPublicId(publicId);
      if (banner?.teamId !== auth.team.id) {
        throw invalidRequest([
          {
            field: `bannerIds[${index}]`,
            message: `bannerIds[${index}] is not a banner of this team`,
          },
        ]);
      }
    }
  }

  /**
   * One signed `webhook.test` event sent now (docs/webhooks.md), outside the retry schedule. The
   * caller's deadline, or its leaving, ends the attempt: no answer waits on it.
   */
  async function testSend(endpoint: WebhookEndpointRecord, signal: AbortSignal) {
    const at = clock();
    const eventId = `evt_test_${randomUUID().replaceAll("-", "")}`;
    const body = JSON.stringify({
      type: "webhook.test",
      timestamp: at.toISOString(),
      data: { webhookId: endpoint.id },
    });
    const headers = signedHeaders(signingSecrets(endpoint, secrets, at), eventId, at, body);
    const outcome = await sendWebhook({
      url: endpoint.url,
      headers,
      body,
      guard,
      signal,
      tenant: endpoint.teamId,
      timeoutMs: deliveryTimeoutMs,
    });
    signal.throwIfAborted();
    return {
      success: outcome.ok,
      eventId,
      statusCode: outcome.statusCode,
      error: outcome.error ?? "",
      responseExcerpt: outcome.excerpt ?? "",
    };
  }

  return {
    listWebhooks: (_request, ctx) =>
      admitted(ctx, false, async (auth) => ({
        webhooks: (await store.webhooks.listEndpoints(auth.team.id, ctx)).map((e) =>
          webhookMessage(e, clock()),
        ),
      })),

    getWebhook: (request, ctx) =>
      admitted(ctx, false, async (auth) => ({
        webhook: webhookMessage(await ownEndpoint(auth, request.id), clock()),
      })),

    createWebhook: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const input = readWebhookCreation(
          bodyOf(CreateWebhookRequestSchema, request, typedCreation, bodyLimit),
          guard,
        );
        await checkBanners(auth, input.bannerIds);
        const now = clock();
        const secret = generateWebhookSecret();
        const endpoint: WebhookEndpointRecord = {
          id: randomUUID(),
          teamId: auth.team.id,
          ...input,
          enabled: true,
          sealedSecret: secrets.seal(secret),
          createdAt: now,
          updatedAt: now,
          version: 1,
        };
        await insertWithinMaximum(
          () => store.webhooks.insertEndpoint(endpoint, MAX_WEBHOOKS_PER_TEAM),
          {
            records: "Webhooks",
            atMaximum: `This team has ${MAX_WEBHOOKS_PER_TEAM} webhooks, the most it may have; delete one before creating another`,
          },
        );
        return { webhook: webhookMessage(endpoint, now, secret) };
      }),

    updateWebhook: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const update = readWebhookUpdate(
          bodyOf(UpdateWebhookRequestSchema, request, typedUpdate, bodyLimit),
          guard,
        );
        await checkBanners(auth, update.bannerIds);
        const secret = update.rotateSecret ? generateWebhookSecret() : "";
        for (let attempt = 0; attempt < REPLACE_ATTEMPTS; attempt++) {
          const current = await ownEndpoint(auth, request.id);
          const now = clock();
          const next: WebhookEndpointRecord = {
            ...current,
            url: update.url ?? current.url,
            eventTypes: update.eventTypes ?? current.eventTypes,
            bannerIds: update.bannerIds ?? current.bannerIds,
            description: update.description ?? current.description,
          };
          if (update.enabled === true && !current.enabled) {
            next.enabled = true;
            delete next.disabledReason;
            delete next.disabledAt;
            delete next.failingSince;
          } else if (update.enabled === false && current.enabled) {
            Object.assign(next, {
              enabled: false,
              disabledReason: "disabled by request",
              disabledAt: now,
            });
          }
          if (secret) {
            const grace = (update.secretGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS) * 1000;
            next.sealedSecret = secrets.seal(secret);
            next.sealedPreviousSecret = current.sealedSecret;
            next.previousSecretExpiresAt = new Date(now.getTime() + grace);
          } else if (sameSettings(current, next)) {
            // Nothing to change (`{}`, or the stored values sent back): no write, updatedAt kept.
            return { webhook: webhookMessage(current, now) };
          }
          // A write drops a previous secret whose grace period is over (or, after a rotation
          // with a grace period of 0, one that never had any).
          const written: WebhookEndpointRecord = {
            ...withoutExpiredPreviousSecret(next, now),
            updatedAt: now,
            version: current.version + 1,
          };
          if (await store.webhooks.replaceEndpoint(written, current.version)) {
            return { webhook: webhookMessage(written, now, secret) };
          }
        }
        throw new DomainError(
          "conflict",
          "conflict",
          "The webhook is being changed concurrently; retry the request",
        );
      }),

    deleteWebhook: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        if (!(await store.webhooks.deleteEndpoint(auth.team.id, request.id))) {
          throw notFound("No webhook with that id on this team");
        }
        return { deleted: true };
      }),

    testWebhook: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const endpoint = await ownEndpoint(auth, request.id);
        if (testsByTeam.of(auth.team.id) >= MAX_TESTS_PER_TEAM) {
          throw new DomainError(
            "rate_limited",
            "rate_limited",
            `The team already has ${MAX_TESTS_PER_TEAM} test sends in flight on this daemon; retry once one has ended`,
            { retryAfterSeconds: TEST_RETRY_SECONDS },
          );
        }
        testsByTeam.enter(auth.team.id);
        try {
          return await testSend(endpoint, ctx.signal);
        } finally {
          testsByTeam.leave(auth.team.id);
        }
      }),

    listDeliveries: (request, ctx) =>
      admitted(ctx, false, async (auth) => {
        const paging = readDeliveryPaging(request.pageSize, request.pageToken, request.status);
        await ownEndpoint(auth, request.webhookId);
        const found = await store.webhooks.listDeliveries({
          teamId: auth.team.id,
          webhookId: request.webhookId,
          status: paging.status,
          beforeId: paging.beforeId,
          limit: paging.limit + 1,
          cancel: ctx,
        });
        const page = found.slice(0, paging.limit);
        return {
          deliveries: page.map(deliveryMessage),
          nextPageToken: found.length > paging.limit ? (page.at(-1)?.id ?? "") : "",
        };
      }),

    replayDeliveries: (request, ctx) =>
      admitted(ctx, true, async (auth) => {
        const endpoint = await ownEndpoint(auth, request.webhookId);
        if (!request.deliveryId === !request.since) {
          throw invalidRequest([
            {
              field: "",
              message: "Name either one delivery (deliveryId) or a time (since), not both",
            },
          ]);
        }
        const failedSince = request.since ? readReplaySince(request.since) : undefined;
        const now = clock();
        if (request.deliveryId) {
          const delivery = await store.webhooks.getDelivery(auth.team.id, request.deliveryId);
          if (delivery?.webhookId !== request.webhookId) {
            throw notFound("No delivery with that id for this webhook");
          }
          if (delivery.status === "pending") {
            throw new DomainError(
              "conflict",
              "conflict",
              "The delivery is still pending; it is already scheduled",
            );
          }
        }
        // A replay to a disabled endpoint would fail at once, unsent ("not sent: the endpoint is
        // disabled"), with its attempts counted again from zero: refused instead.
        if (!endpoint.enabled) {
          throw new DomainError(
            "failed_precondition",
            "failed_precondition",
            "The webhook is disabled; enable it before replaying its deliveries",
          );
        }
        // Exactly one of the two was named (checked above).
        const selection = failedSince ? { failedSince } : { deliveryId: request.deliveryId };
        const replayed = await store.webhooks.replay(
          auth.team.id,
          request.webhookId,
          selection,
          now,
        );
        return { replayed };
      }),
  };
}
