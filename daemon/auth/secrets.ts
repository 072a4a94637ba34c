import { createHmac, hash, randomBytes, timingSafeEqual } from "node:crypto";

/** Compares two secrets in time independent of where they differ (and of their lengths). */
export function secretsEqual(presented: string, expected: string): boolean {
  return timingSafeEqual(sha256(presented), sha256(expected));
}

/**
 * A fixed-length digest to compare in constant time: SHA-256 as hex from Node's one-shot hash,
 * on every authenticated call. About a third of the cost of a Hash object, and half that of the
 * one-shot hash's own "buffer" output.
 */
function sha256(value: string): Buffer {
  return Buffer.from(hash("sha256", value, "hex"), "latin1");
}

/**
 * One expected secret (the operator token), hashed once: each check hashes only what was
 * presented and compares fixed-length digests in constant time, as secretsEqual does.
 */
export class SecretCheck {
  private readonly digest: Buffer;

  constructor(expected: string) {
    this.digest = sha256(expected);
  }

  matches(presented: string): boolean {
    return timingSafeEqual(sha256(presented), this.digest);
  }

  /** matches() for a secret already hashed: its SHA-256 as hex (secretHash). */
  matchesDigest(presentedHex: string): boolean {
    const presented = Buffer.from(presentedHex, "latin1");
    // A digest's length is no secret; timingSafeEqual throws on unequal lengths.
    return presented.length === this.digest.length && timingSafeEqual(presented, this.digest);
  }
}

const checks = new Map<string, SecretCheck>();
/** Daemons per process: one, a few in tests; the map never grows past this. */
const MAX_CHECKS = 16;

/** The SecretCheck of an expected secret, made once per secret and kept for the process. */
export function secretCheck(expected: string): SecretCheck {
  let check = checks.get(expected);
  if (!check) {
    if (checks.size >= MAX_CHECKS) checks.clear();
    check = new SecretCheck(expected);
    checks.set(expected, check);
  }
  return check;
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
