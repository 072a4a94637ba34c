import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { boundedMemo } from "#daemon/memo.js";

/** Standard Webhooks: a signing secret is `whsec_` + base64 of its key bytes (24 at least; 32 here). */
const SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 32;
/** Version tag of the sealed form, so the format can change without ambiguity. */
const SEALED_PREFIX = "v1.";
const IV_BYTES = 12;
/**
 * The GCM tag's length, required on opening: a decipher takes a tag cut to as few as 4 bytes
 * otherwise, and a value altered that way would still open (or be forged in 2^32 tries).
 */
const TAG_BYTES = 16;
/** Opened secrets a box keeps; past this many it starts over. */
const OPENED_MAX = 1_000;

/** A new endpoint signing secret, shown to the integrator once. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString("base64");
}

/** The HMAC key of a signing secret: the base64 after `whsec_`, decoded. */
export function signingKeyOf(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    "base64",
  );
}

/**
 * Seals endpoint secrets at rest with AES-256-GCM under keys every daemon of the store derives
 * alike (daemon/auth/secrets.ts): the store alone never reveals a secret, and a sealed value
 * altered in the store fails to open instead of signing with a wrong key. The keyring follows
 * identity-key rotation (README, Privacy): new secrets are sealed under the first key, a
 * secret sealed under any key still listed opens, and the stored ones are sealed anew under the
 * first key at start-up (reseal-secrets.ts), so that an older key can be dropped.
 */
export class WebhookSecretBox {
  private readonly keys: readonly Buffer[];
  /** Opened secrets, and the place in the keyring of the key that opened each, by sealed value. */
  private readonly opened = boundedMemo(OPENED_MAX, (sealed: string) => this.decrypt(sealed));

  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0) throw new RangeError("the webhook secret keyring is empty");
    for (const key of keys) {
      if (key.length !== 32) throw new RangeError("a webhook secret key must be 32 bytes");
    }
    this.keys = keys;
  }

  seal(secret: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.keys[0] as Buffer, iv, {
      authTagLength: TAG_BYTES,
    });
    const sealed = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), sealed].map((part) => part.toString("base64url"));
    return SEALED_PREFIX + parts.join(".");
  }

  /**
   * The secret; throws when the value was sealed under another key or altered. A value is
   * opened once (an AES-GCM decryption under each listed key until one fits) and then kept: a
   * rotation seals a new value, so a kept secret is never a stale one.
   */
  open(sealed: string): string {
    return this.opened(sealed).secret;
  }

  /**
   * The secret sealed anew under the current key, when `sealed` opens only under an older one
   * (an identity key rotated out, or the operator token's); null when the current key opens it.
   * Throws as open() does. The secret itself stays the same: its integrator sees no change.
   */
  resealed(sealed: string): string | null {
    const { secret, keyIndex } = this.opened(sealed);
    return keyIndex === 0 ? null : this.seal(secret);
  }

  private decrypt(sealed: string): { secret: string; keyIndex: number } {
    const [iv, tag, data] = sealed
      .slice(SEALED_PREFIX.length)
      .split(".")
      .map((part) => Buffer.from(part, "base64url"));
    if (!sealed.startsWith(SEALED_PREFIX) || !iv?.length || !tag?.length || data === undefined) {
      throw new Error("the stored webhook secret is not in a known sealed form");
    }
    for (const [keyIndex, key] of this.keys.entries()) {
      const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
      try {
        decipher.setAuthTag(tag);
        const secret = Buffer.concat([decipher.update(data), decipher.final()]).toString("utf8");
        return { secret, keyIndex };
      } catch {
        // The GCM tag does not verify under this key: try the next one.
      }
    }
    throw new Error(
      "the stored webhook secret cannot be opened: it was sealed under an identity key or operator token no longer configured, or altered",
    );
  }
}
