import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openLmdbStore } from "#daemon/store/lmdb-store.js";
import type { Store } from "#daemon/store/store.js";
import { DAY, MINUTE, shifted } from "#daemon/store/store-contract-harness.js";
import { resealWebhookSecrets } from "#daemon/webhooks/reseal-secrets.js";
import { generateWebhookSecret, WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";
import { anEndpoint } from "#daemon/webhooks/webhook-store.contract.js";

describe("sealing webhook signing secrets anew during an identity-key rotation", () => {
  const [olderKey, currentKey, droppedKey] = [randomBytes(32), randomBytes(32), randomBytes(32)];
  const before = new WebhookSecretBox([olderKey]);
  const during = new WebhookSecretBox([currentKey, olderKey]);
  const after = new WebhookSecretBox([currentKey]);
  const now = new Date();
  let dataDir: string;
  let store: Store;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "consent-reseal-"));
    store = await openLmdbStore({ dataDir });
  });
  afterEach(async () => {
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** An endpoint of its own team whose secret (and previous secret, if given) `box` sealed. */
  async function storedEndpoint(box: WebhookSecretBox, previous?: { secret: string; until: Date }) {
    const secret = generateWebhookSecret();
    const endpoint = {
      ...anEndpoint(randomUUID(), shifted(now, -DAY)),
      sealedSecret: box.seal(secret),
      ...(previous && {
        sealedPreviousSecret: box.seal(previous.secret),
        previousSecretExpiresAt: previous.until,
      }),
    };
    await store.webhooks.insertEndpoint(endpoint);
    return { endpoint, secret };
  }

  const reread = async (id: string, teamId: string) => {
    const stored = await store.webhooks.getEndpoint(teamId, id);
    if (!stored) throw new Error("the endpoint is gone");
    return stored;
  };

  it("seals anew every secret only an older key opens, previous secrets included, and keeps each secret", async () => {
    const previous = generateWebhookSecret();
    const old = await storedEndpoint(before, { secret: previous, until: shifted(now, DAY) });
    const current = await storedEndpoint(during);
    // More than one page of endpoints (100 a page), every one sealed under the older key.
    const many = await Promise.all(Array.from({ length: 120 }, () => storedEndpoint(before)));

    const outcome = await resealWebhookSecrets(store.webhooks, during, () => now);
    expect(outcome).toEqual({ resealed: 121, unopenable: 0, contended: 0 });
    const resealed = await reread(old.endpoint.id, old.endpoint.teamId);
    // The current key alone opens them now, to the same secrets.
    expect(after.open(resealed.sealedSecret)).toBe(old.secret);
    expect(after.open(resealed.sealedPreviousSecret ?? "")).toBe(previous);
    expect(resealed).toMatchObject({
      version: 2,
      updatedAt: old.endpoint.updatedAt,
      previousSecretExpiresAt: shifted(now, DAY),
    });
    for (const { endpoint, secret } of many) {
      expect(after.open((await reread(endpoint.id, endpoint.teamId)).sealedSecret)).toBe(secret);
    }
    // One already under the current key is left as it was.
    expect(await reread(current.endpoint.id, current.endpoint.teamId)).toEqual(current.endpoint);
    // A second sweep finds nothing to do.
    expect(await resealWebhookSecrets(store.webhooks, during, () => now)).toEqual({
      resealed: 0,
      unopenable: 0,
      contended: 0,
    });
  });

  it("drops an expired previous secret rather than sealing it, and counts the secrets no key opens", async () => {
    const expired = await storedEndpoint(before, {
      secret: generateWebhookSecret(),
      until: shifted(now, -MINUTE),
    });
    const lost = await storedEndpoint(new WebhookSecretBox([droppedKey]));
    const outcome = await resealWebhookSecrets(store.webhooks, during, () => now);
    expect(outcome).toEqual({ resealed: 1, unopenable: 1, contended: 0 });
    const resealed = await reread(expired.endpoint.id, expired.endpoint.teamId);
    expect(after.open(resealed.sealedSecret)).toBe(expired.secret);
    expect(resealed.sealedPreviousSecret).toBeUndefined();
    expect(resealed.previousSecretExpiresAt).toBeUndefined();
    // Left as it is: the key that sealed it may be listed again.
    expect(await reread(lost.endpoint.id, lost.endpoint.teamId)).toEqual(lost.endpoint);
  });

  it("seals each secret anew once when daemons starting together sweep at the same time", async () => {
    const endpoints = await Promise.all(Array.from({ length: 30 }, () => storedEndpoint(before)));
    const outcomes = await Promise.all(
      [during, during, during].map((box) => resealWebhookSecrets(store.webhooks, box, () => now)),
    );
    expect(outcomes.reduce((sum, outcome) => sum + outcome.resealed, 0)).toBe(30);
    expect(outcomes.every((o) => o.unopenable === 0 && o.contended === 0)).toBe(true);
    for (const { endpoint, secret } of endpoints) {
      const stored = await reread(endpoint.id, endpoint.teamId);
      expect([after.open(stored.sealedSecret), stored.version]).toEqual([secret, 2]);
    }
  });
});
