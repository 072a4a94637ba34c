import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

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
