import { afterAll, beforeAll, expect } from "vitest";
import type { Clock } from "#daemon/clock.js";
import { http, mintKey } from "#test/support/api.js";
import { bannerFixture } from "#test/support/consent-log.js";
import {
  startTestService,
  type TestService,
  type TestServiceOptions,
} from "#test/support/service.js";
import { WebhookReceiver } from "#test/support/webhook-receiver.js";

/** The scopes an integrator's key needs to make a banner and subscribe to its events. */
export const WEBHOOK_SCOPES = ["banners:read", "banners:write", "webhooks:read", "webhooks:write"];

/** A team with a banner, a webhook key and one endpoint at `url` (or as `body` says). */
export async function subscribe(
  service: TestService,
  url: string,
  body: Record<string, unknown> = {},
) {
  const fixture = await bannerFixture(service);
  const { key } = await mintKey(service, fixture.teamId, { scopes: WEBHOOK_SCOPES });
  const created = await http(service, "POST", "/api/v1/webhooks", {
    key,
    body: { url: `${url}?team=${fixture.teamId}`, ...body },
  });
  expect(created.status).toBe(201);
  return { ...fixture, key, webhook: created.body.data.webhook };
}

/**
 * A receiver on 127.0.0.1 and a service (daemon and gateway) on `clock` that may deliver to it,
 * with `options` (a shorter delivery timeout); `close()` stops both.
 */
export async function startDeliveryService(
  clock: Clock,
  options: Pick<TestServiceOptions, "webhookDeliveryTimeoutMs"> = {},
) {
  const receiver = await new WebhookReceiver().start();
  const service = await startTestService({
    ...options,
    gateway: true,
    clock,
    env: { CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" },
  });
  const close = async () => {
    await service.close();
    await receiver.stop();
  };
  return { receiver, service, close };
}

/**
 * Starts, for the enclosing describe, startDeliveryService() (with `options`) on a clock
 * `offsetMs` ahead of the real one, which a test moves to bring a retry due.
 */
export function useDeliveryService(options: Parameters<typeof startDeliveryService>[1] = {}) {
  const context = { offsetMs: 0 } as {
    offsetMs: number;
    service: TestService;
    receiver: WebhookReceiver;
    close: () => Promise<void>;
  };
  beforeAll(async () => {
    Object.assign(
      context,
      await startDeliveryService(() => new Date(Date.now() + context.offsetMs), options),
    );
  });
  afterAll(() => context.close?.());
  return context;
}
