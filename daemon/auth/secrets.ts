import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { secretHash } from "#daemon/keys/api-key-format.js";
import { boundedMemo } from "#daemon/memo.js";

/**
 * Whether two digests (secretHash's hex) are equal, in time independent of where they differ. A
 * digest's length is no secret, and timingSafeEqual throws on unequal lengths.
 */
export function digestsEqual(a: string, b: string): boolean {
  return (
    a.length === b.length && timingSafeEqual(Buffer.from(a, "latin1"), Buffer.from(b, "latin1"))
  );
}

/** Compares two secrets in time independent of where they differ (and of their lengths). */
export function secretsEqual(presented: string, expected: string): boolean {
  return digestsEqual(secretHash(presented), secretHash(expected));
}

/**
 * One expected secret (the operator token), hashed once: each check hashes only what was
 * presented and compares fixed-length digests in constant time, as secretsEqual does.
 */
export class SecretCheck {
  private readonly digest: string;

  constructor(expected: string) {
    this.digest = secretHash(expected);
  }

  matches(presented: string): boolean {
    return this.matchesDigest(secretHash(presented));
  }

  /** matches() for a secret already hashed (secretHash). */
  matchesDigest(presented: string): boolean {
    return digestsEqual(presented, this.digest);
  }
}

/**
 * The SecretCheck of an expected secret, made once per secret and kept for the process (daemons
 * per process: one, a few in tests; at most 16 are kept).
 */
export const secretCheck = boundedMemo(16, (expected: string) => new SecretCheck(expected));

/** A new operator token: 32 random bytes. */
export function generateOperatorToken(): string {
  return `consent_op_${randomBytes(32).toString("base64url")}`;
}

/** A new dashboard session token: 32 random bytes. */
export function generateSessionToken(): string {
  return `cs_${randomBytes(32).toString("base64url")}`;
}

/**
 * A secret for one purpose that every daemon on the store derives alike (client-IP hashing,
 * preference links): from the current identity key when there is one, else from the operator
 * token, which decisions §1 also makes the same on every daemon.
 */
export function sharedSecret(
  identityDerived: (purpose: string) => Buffer | null,
  operatorToken: string,
  purpose: string,
): Buffer {
  return identityDerived(purpose) ?? createHmac("sha256", operatorToken).update(purpose).digest();
}
