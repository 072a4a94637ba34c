import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { generateWebhookSecret, WebhookSecretBox } from "#daemon/webhooks/webhook-secrets.js";

describe("WebhookSecretBox", () => {
  const [oldKey, newKey, otherKey] = [randomBytes(32), randomBytes(32), randomBytes(32)];

  it("opens what it sealed, and never stores the secret in the clear", () => {
    const box = new WebhookSecretBox([newKey]);
    const secret = generateWebhookSecret();
    const sealed = box.seal(secret);
    expect(sealed).not.toContain(secret.slice("whsec_".length));
    expect(box.open(sealed)).toBe(secret);
  });

  it("still opens secrets sealed under a rotated-out key while that key stays listed", () => {
    const secret = generateWebhookSecret();
    const sealedBefore = new WebhookSecretBox([oldKey]).seal(secret);
    const rotated = new WebhookSecretBox([newKey, oldKey]);
    expect(rotated.open(sealedBefore)).toBe(secret);
    // New secrets use the current key: a daemon knowing only the new key opens them.
    expect(new WebhookSecretBox([newKey]).open(rotated.seal(secret))).toBe(secret);
  });

  it("refuses a value sealed under an unlisted key, or altered", () => {
    const secret = generateWebhookSecret();
    const sealed = new WebhookSecretBox([otherKey]).seal(secret);
    expect(() => new WebhookSecretBox([newKey, oldKey]).open(sealed)).toThrow(/cannot be opened/);
    const box = new WebhookSecretBox([newKey]);
    const good = box.seal(secret);
    const at = good.length - 2;
    const altered = `${good.slice(0, at)}${good[at] === "A" ? "B" : "A"}${good.slice(at + 1)}`;
    expect(altered).not.toBe(good);
    expect(() => box.open(altered)).toThrow(/cannot be opened/);
    expect(() => box.open("plain")).toThrow(/not in a known sealed form/);
    // The tag cut short: the part left would verify, were a short tag taken.
    const [version, iv, tag, data] = good.split(".") as [string, string, string, string];
    const short = Buffer.from(tag, "base64url").subarray(0, 4).toString("base64url");
    expect(() => box.open([version, iv, short, data].join("."))).toThrow(/cannot be opened/);
  });
});
