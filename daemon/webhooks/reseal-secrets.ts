import type { Clock } from "#daemon/clock.js";
import type { WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import {
  changeEndpoint,
  type WebhookEndpointRecord,
  type WebhookStore,
  withoutExpiredPreviousSecret,
} from "#daemon/webhooks/webhook-store.js";

/** Endpoints one read of the sweep takes. */
const PAGE_SIZE = 100;

export interface ResealOutcome {
  /** Endpoints whose signing secrets were sealed anew under the current key. */
  resealed: number;
  /**
   * Endpoints left with a secret no key listed opens (sealed under a key already dropped, or
   * altered in the store), which the sweep cannot seal anew: their deliveries fail until the
   * key is listed again or the secret is rotated.
   */
  unopenable: number;
  /** Endpoints whose write lost to rivals' writes every time: sealed anew at the next start. */
  contended: number;
}

/**
 * During an identity-key rotation (README, "Privacy"): seals every stored endpoint signing secret
 * that opens only under an older key (or the operator token's) anew under the current one, so the
 * older key can be dropped without rotating the secrets integrators verify with: each secret stays
 * the same, only its sealed form changes (and the endpoint's version, not its `updatedAt`).
 * Daemons starting together may sweep at once: each write compares the endpoint's version, so a
 * rival's write (theirs, or an integrator's change) is read again and sealed anew if need be.
 */
export async function resealWebhookSecrets(
  store: WebhookStore,
  secrets: WebhookSecretBox,
  clock: Clock,
): Promise<ResealOutcome> {
  const outcome: ResealOutcome = { resealed: 0, unopenable: 0, contended: 0 };
  let after: string | null = null;
  for (;;) {
    const page: WebhookEndpointRecord[] = await store.endpointsAfter(after, PAGE_SIZE);
    for (const endpoint of page) {
      const at = clock();
      try {
        const written = await changeEndpoint(store, endpoint, at, (current) =>
          resealed(current, secrets, at),
        );
        // Unchanged: sealed under the current key already (maybe by a rival sweep meanwhile).
        if (written === "changed") outcome.resealed++;
        if (written === "contended") outcome.contended++;
      } catch (error) {
        if (!(error instanceof UnopenableSecretError)) throw error;
        outcome.unopenable++;
      }
    }
    const last = page.at(-1);
    if (page.length < PAGE_SIZE || last === undefined) return outcome;
    after = last.id;
  }
}

class UnopenableSecretError extends Error {}

/**
 * The endpoint with its live secrets sealed under the current key; the endpoint itself when they
 * already are. Throws UnopenableSecretError when one opens under no key listed.
 */
function resealed(
  endpoint: WebhookEndpointRecord,
  secrets: WebhookSecretBox,
  at: Date,
): WebhookEndpointRecord {
  const live = withoutExpiredPreviousSecret(endpoint, at);
  const anew = (sealed: string | undefined) => {
    if (sealed === undefined) return null;
    try {
      return secrets.resealed(sealed);
    } catch (error) {
      throw new UnopenableSecretError(String(error));
    }
  };
  const secret = anew(live.sealedSecret);
  const previous = anew(live.sealedPreviousSecret);
  if (secret === null && previous === null) return endpoint;
  return {
    ...live,
    ...(secret !== null && { sealedSecret: secret }),
    ...(previous !== null && { sealedPreviousSecret: previous }),
  };
}
