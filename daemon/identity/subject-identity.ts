import { createHash, createHmac } from "node:crypto";
import { DomainError, UNTIL_OPERATOR_RETRY_AFTER_SECONDS } from "#daemon/errors.js";

/** One identity key: 32 secret bytes and an id derived from them. */
export interface IdentityKey {
  id: string;
  secret: Buffer;
}

/**
 * Parses CONSENT_IDENTITY_KEY: one or more base64 keys of 32 bytes, comma-separated, the current
 * key first. Older keys stay listed during a rotation so records written under them are still
 * found (decisions §4). Throws with a readable message on a malformed value.
 */
export function parseIdentityKeys(value: string): IdentityKey[] {
  const parts = value
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new Error("the identity key is empty");
  return parts.map((part, index) => {
    const secret = Buffer.from(part, "base64");
    if (
      secret.length !== 32 ||
      secret.toString("base64").replace(/=+$/, "") !== part.replace(/=+$/, "")
    ) {
      throw new Error(`identity key #${index + 1} is not the base64 form of 32 bytes`);
    }
    return { id: identityKeyId(secret), secret };
  });
}

/** A short public id for a key, so stored hashes say which key made them. */
function identityKeyId(secret: Buffer): string {
  return createHash("sha256")
    .update("consent identity key id\0")
    .update(secret)
    .digest("hex")
    .slice(0, 12);
}

/**
 * Hashes subject identities (decisions §4): the store keeps only an HMAC-SHA256 of (team, banner,
 * namespace, subject id), tagged "<key id>:" so the key can be rotated. Without a usable key every
 * subject call fails with 503 identity_unavailable rather than storing anything weaker.
 */
export class SubjectIdentity {
  readonly #keys: readonly IdentityKey[];

  constructor(keys: readonly IdentityKey[]) {
    this.#keys = keys;
  }

  get available(): boolean {
    return this.#keys.length > 0;
  }

  /** The subject's hash under every configured key, current key first. */
  hashes(teamId: string, bannerId: string, namespace: string, subjectId: string): string[] {
    if (this.#keys.length === 0) {
      throw new DomainError(
        "unavailable",
        "identity_unavailable",
        "Subject identity hashing is temporarily unavailable; retry later",
        // No key comes back by itself, only when the operator gives one and restarts the daemon.
        { retryAfterSeconds: UNTIL_OPERATOR_RETRY_AFTER_SECONDS },
      );
    }
    // Length-prefixed fields: no two different tuples produce the same HMAC input.
    const input = [teamId, bannerId, namespace, subjectId]
      .map((field) => `${field.length}:${field}`)
      .join("");
    return this.#keys.map(
      (key) => `${key.id}:${createHmac("sha256", key.secret).update(input).digest("base64url")}`,
    );
  }

  /**
   * A secret derived from the current key for hashing client IP addresses in rate-limit counter
   * names, so no raw IP is stored and every daemon sharing the key shares the counters.
   */
  derivedSecret(purpose: string): Buffer | null {
    return this.derivedSecrets(purpose)[0] ?? null;
  }

  /** The secret for `purpose` under every configured key, current first (for keyrings). */
  derivedSecrets(purpose: string): Buffer[] {
    return this.#keys.map((key) => createHmac("sha256", key.secret).update(purpose).digest());
  }
}
