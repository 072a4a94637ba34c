import { setMaxListeners } from "node:events";
import type { Logger } from "pino";
import type { Clock } from "#daemon/clock.js";
import { messageOf } from "#daemon/errors.js";
import type { Store } from "#daemon/store/store.js";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { nextAttemptAt, retryAfterMs } from "#daemon/webhooks/retry-schedule.js";
import { signedHeaders } from "#daemon/webhooks/signing.js";
import type { WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { DeliveryAgents, type SendOutcome, sendWebhook } from "#daemon/webhooks/webhook-sender.js";
import {
  type AttemptResult,
  changeEndpoint,
  type DeliveryRecord,
  type WebhookEndpointRecord,
  withoutExpiredPreviousSecret,
} from "#daemon/webhooks/webhook-store.js";

/** docs/webhooks.md: an endpoint whose every attempt failed for this long is disabled. */
export const FAILING_DISABLE_AFTER_MS = 5 * 24 * 3_600_000;

/** The secrets that sign an attempt at `now`: the current one, plus the previous during a rotation. */
export function signingSecrets(
  endpoint: WebhookEndpointRecord,
  secrets: WebhookSecretBox,
  now: Date,
): string[] {
  const { sealedSecret, sealedPreviousSecret } = withoutExpiredPreviousSecret(endpoint, now);
  const previous = sealedPreviousSecret === undefined ? [] : [secrets.open(sealedPreviousSecret)];
  return [secrets.open(sealedSecret), ...previous];
}

export interface DeliveryAttemptsOptions {
  store: Store;
  clock: Clock;
  guard: AddressGuard;
  secrets: WebhookSecretBox;
  logger: Logger;
  /** Jitter source of the retry schedule. */
  random?: () => number;
  /** How long one attempt may take; default DELIVERY_TIMEOUT_MS (webhook-sender.ts). */
  deliveryTimeoutMs?: number;
  /** The claim the attempts are made under: their outcomes are recorded only while it holds. */
  owner: string;
}

/** What an attempt observed, whatever its outcome; `lastAttemptAt` is when it began. */
type Observed = Pick<
  AttemptResult,
  "attempts" | "lastStatusCode" | "lastError" | "lastResponseExcerpt"
> & { lastAttemptAt: Date };

/**
 * The attempts of one dispatcher (dispatcher.ts): each sends a claimed delivery to its endpoint,
 * signed (docs/webhooks.md), over the dispatcher's pooled connections, and records the outcome
 * under its claim: delivered, due again on the retry schedule, or failed for good; the endpoint's
 * failure record follows (a run of failures, disabled after 410 Gone or five days of them). Kept
 * apart from the dispatcher's passes, which only decide which deliveries to attempt and when.
 */
export class DeliveryAttempts {
  private agents = new DeliveryAgents();
  /** Aborted by cut(): ends every exchange in flight. */
  private shutdown = DeliveryAttempts.shutdownController();

  constructor(private readonly options: DeliveryAttemptsOptions) {}

  /** Every attempt in flight listens to it: up to MAX_IN_FLIGHT at once is no listener leak. */
  private static shutdownController(): AbortController {
    const controller = new AbortController();
    setMaxListeners(0, controller.signal);
    return controller;
  }

  /**
   * Closes the pooled connections to endpoints and forgets a cut; attempts after it open new
   * connections and run their course.
   */
  closeConnections(): void {
    this.agents.destroy();
    this.agents = new DeliveryAgents();
    this.shutdown = DeliveryAttempts.shutdownController();
  }

  /**
   * Ends the exchanges in flight at once (the daemon's shutdown reached its limit): each attempt
   * whose endpoint has not answered gives its delivery back (release), one whose status has
   * arrived is recorded with it.
   */
  cut(): void {
    this.shutdown.abort();
  }

  /**
   * Makes one attempt; `sent` is called once the exchange with the endpoint is over. Ends
   * "recorded" with its outcome, or "given back" when cut before the endpoint answered.
   */
  async attempt(delivery: DeliveryRecord, sent: () => void): Promise<"recorded" | "given back"> {
    const { store, clock } = this.options;
    const signal = this.shutdown.signal;
    const endpoint = await store.webhooks.getEndpoint(delivery.teamId, delivery.webhookId);
    if (!endpoint?.enabled) {
      // Not sent: kept as a dead letter, replayable once the endpoint is enabled again.
      const reason = endpoint?.disabledReason ?? "the endpoint was removed";
      await this.complete(delivery, {
        ...previousAttempt(delivery),
        status: "failed",
        lastError: `not sent: the endpoint is disabled (${reason})`,
      });
      return "recorded";
    }
    const at = clock();
    const outcome = await this.send(endpoint, delivery, at, signal);
    sent();
    if (outcome.abandoned) {
      await this.release(delivery);
      return "given back";
    }
    // Retries are counted from the end of the exchange: after a 15 s timeout, the first one
    // comes about 5 s later, not at once.
    const ended = clock();
    const observed: Observed = {
      attempts: delivery.attempts + 1,
      lastAttemptAt: at,
      lastStatusCode: outcome.statusCode,
      lastError: outcome.error,
      lastResponseExcerpt: outcome.excerpt,
    };
    if (outcome.ok) await this.delivered(delivery, endpoint, observed);
    else await this.failed(delivery, endpoint, outcome, observed, ended);
    return "recorded";
  }

  /**
   * Gives a claimed delivery back unattempted, or its attempt cut before the endpoint answered:
   * due as it was (at once), its attempts and last outcome as they were, the endpoint's failure
   * record untouched, and its lease released, so any daemon on the store claims it at its next
   * pass instead of after the lease. The receiver may have read a cut attempt's request: the
   * next attempt, with the same `webhook-id`, is then a duplicate (docs/webhooks.md).
   */
  async release(delivery: DeliveryRecord): Promise<void> {
    await this.complete(delivery, {
      ...previousAttempt(delivery),
      status: "pending",
      nextAttemptAt: delivery.nextAttemptAt ?? this.options.clock(),
    });
  }

  /** The exchange with the endpoint; a failure to sign or send is the attempt's failure. */
  private async send(
    endpoint: WebhookEndpointRecord,
    delivery: DeliveryRecord,
    at: Date,
    signal: AbortSignal,
  ): Promise<SendOutcome> {
    try {
      const headers = signedHeaders(
        signingSecrets(endpoint, this.options.secrets, at),
        delivery.eventId,
        at,
        delivery.payload,
      );
      return await sendWebhook({
        url: endpoint.url,
        headers,
        body: delivery.payload,
        guard: this.options.guard,
        agents: this.agents,
        tenant: endpoint.teamId,
        timeoutMs: this.options.deliveryTimeoutMs,
        signal,
      });
    } catch (error) {
      return {
        ok: false,
        statusCode: 0,
        error: messageOf(error),
      };
    }
  }

  /** Records a delivered attempt; the endpoint's run of failures, if any, ends. */
  private async delivered(
    delivery: DeliveryRecord,
    endpoint: WebhookEndpointRecord,
    observed: Observed,
  ): Promise<void> {
    const at = observed.lastAttemptAt;
    const recorded = await this.complete(delivery, {
      ...observed,
      status: "succeeded",
      succeededAt: at,
    });
    if (recorded) {
      this.options.logger.debug(
        { deliveryId: delivery.id, webhookId: delivery.webhookId, attempts: observed.attempts },
        "webhook delivered",
      );
    }
    if (endpoint.failingSince)
      await changeEndpoint(this.options.store.webhooks, endpoint, at, (e) =>
        e.url === endpoint.url ? { ...e, failingSince: undefined } : e,
      );
  }

  /**
   * Records a failed attempt: due again on the retry schedule, or failed for good once the
   * endpoint is disabled by it. The answer tells of the URL it came from: an endpoint given
   * another URL during the attempt (an integrator moving off a receiver that now answers 410)
   * keeps its state, and the delivery its retries, which go to the new URL. The 5 days count on
   * the stored failure record, which a re-enable during the attempt has cleared.
   */
  private async failed(
    delivery: DeliveryRecord,
    endpoint: WebhookEndpointRecord,
    outcome: SendOutcome,
    observed: Observed,
    ended: Date,
  ): Promise<void> {
    const { store } = this.options;
    const at = observed.lastAttemptAt;
    const current = await store.webhooks.getEndpoint(endpoint.teamId, endpoint.id);
    const sameUrl = current?.url === endpoint.url;
    const disableReason = current && sameUrl ? disableReasonOf(current, outcome, at) : undefined;
    const next = disableReason
      ? null
      : nextAttemptAt(
          observed.attempts,
          ended,
          retryAfterMs(outcome.retryAfter, ended),
          this.options.random,
        );
    await this.complete(
      delivery,
      next
        ? { ...observed, status: "pending", nextAttemptAt: next }
        : { ...observed, status: "failed" },
    );
    if (!current || !sameUrl) return;
    await changeEndpoint(store.webhooks, current, at, (e) =>
      e.url === endpoint.url
        ? {
            ...e,
            failingSince: e.failingSince ?? at,
            ...(disableReason && { enabled: false, disabledReason: disableReason, disabledAt: at }),
          }
        : e,
    );
    if (disableReason)
      this.options.logger.warn(
        { webhookId: endpoint.id, reason: disableReason },
        "webhook endpoint disabled",
      );
  }

  /** Records the attempt's outcome under this dispatcher's claim; false when it moved on. */
  private async complete(delivery: DeliveryRecord, result: AttemptResult): Promise<boolean> {
    const stored = await this.options.store.webhooks.completeAttempt(
      delivery.id,
      this.options.owner,
      delivery.attempts,
      result,
    );
    if (!stored) {
      // An endpoint removed meanwhile took its deliveries along: the operator's doing, nothing to
      // warn of. Otherwise the delivery was replayed, or another daemon took it over after a
      // lease shorter than the attempt (a duplicate send is possible): worth a warning.
      const removed = !(await this.options.store.webhooks.getEndpoint(
        delivery.teamId,
        delivery.webhookId,
      ));
      this.options.logger[removed ? "debug" : "warn"](
        { deliveryId: delivery.id },
        "webhook delivery moved on during its attempt",
      );
    }
    return stored;
  }
}

/** A delivery's record of its attempts so far, for a result that adds no attempt to it. */
function previousAttempt(delivery: DeliveryRecord): Pick<AttemptResult, keyof Observed> {
  return {
    attempts: delivery.attempts,
    lastAttemptAt: delivery.lastAttemptAt,
    lastStatusCode: delivery.lastStatusCode,
    lastError: delivery.lastError,
    lastResponseExcerpt: delivery.lastResponseExcerpt,
  };
}

/** docs/webhooks.md: 410 Gone disables at once; so does a run of failures lasting five days. */
function disableReasonOf(
  endpoint: WebhookEndpointRecord,
  outcome: SendOutcome,
  at: Date,
): string | undefined {
  if (outcome.statusCode === 410) return "the endpoint answered 410 Gone";
  const since = endpoint.failingSince;
  if (since && at.getTime() - since.getTime() >= FAILING_DISABLE_AFTER_MS) {
    return `every attempt failed for 5 days (since ${since.toISOString()})`;
  }
  return undefined;
}
