import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** Compares two secrets in time independent of where they differ (and of their lengths). */
export function secretsEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

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
