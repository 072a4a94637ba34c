import { createCipheriv, createDecipheriv, createHmac, timingSafeEqual } from "node:crypto";
import { parse as parseUuid, stringify as stringifyUuid } from "uuid";
import { DomainError } from "#daemon/errors.js";

/** decisions §5: a managePreferences link works for 30 minutes. */
export const PREFERENCES_LINK_TTL_MS = 30 * 60_000;

/** The token format; version 1 (the ids in clear) is no longer read. */
const VERSION = 2;
/** version (1) + sealed publicId (16) + sealed consentId (16) + expiry in Unix seconds (4). */
const PAYLOAD_BYTES = 37;
/** HMAC-SHA256 truncated to 128 bits: ample against forgery, and keeps the URL short. */
const SIGNATURE_BYTES = 16;

/** What a valid link grants: changing one consent record of one banner until `expiresAt`. */
export interface PreferencesGrant {
  publicId: string;
  consentId: string;
  expiresAt: Date;
}

/**
 * Makes and checks the tokens of managePreferences links (decisions §5). A token is
 * `<payload>.<signature>`, both base64url: the payload packs the two UUIDs and the expiry in 37
 * bytes, the signature is an HMAC under a secret every daemon on the store shares, so any daemon
 * can check a link another one made. Nothing is stored per link.
 *
 * The two UUIDs are sealed, each one AES-256 block under a key derived from the same secret, so
 * the address reveals neither (a link ends up in browser histories, proxy logs and screenshots,
 * and the consentId is the visitor's pseudonym). A UUID is exactly one block, and AES a
 * permutation of blocks: no padding, no nonce, and one long-lived cipher each way, so a link
 * costs little more than its HMAC (per-link AES-GCM tripled the cost of the log route's link).
 * The same record's links share their sealed ids, which tells a reader only that they belong to
 * one record; the HMAC authenticates the whole payload.
 *
 * The secrets after the first (an older identity key, listed during a rotation) grant nothing:
 * they only tell a link made before the rotation, which the visitor never altered, from an
 * altered one. Only a genuine link is told apart, and a genuine link's expiry already says as
 * much, so a forger, who cannot sign under any of them, learns nothing but "not valid". Once the
 * older key is dropped, a link made under it is past its 30 minutes (the key stays listed far
 * longer, for the stored records, README "Privacy"), and is told it has expired, as any link is:
 * a well-formed token whose expiry has passed is expired whatever key signed it, since the
 * expiry it carries is what it says of itself, which grants nothing.
 */
export class PreferenceLinks {
  /** The current secret, which signs. */
  private readonly secret: Buffer;
  private readonly seal;
  private readonly unseal;

  /** `secrets`: the current one first; the older ones after it. */
  constructor(private readonly secrets: readonly Buffer[]) {
    const [secret] = secrets;
    if (!secret) throw new RangeError("the preferences link keyring is empty");
    this.secret = secret;
    const key = createHmac("sha256", secret).update("consent.v1 preferences link ids\0").digest();
    // ECB on whole blocks only, and never finalised: update() maps each block at once.
    this.seal = createCipheriv("aes-256-ecb", key, null).setAutoPadding(false);
    this.unseal = createDecipheriv("aes-256-ecb", key, null).setAutoPadding(false);
  }

  /** A token for the consent record, valid for 30 minutes from `now`. */
  sign(publicId: string, consentId: string, now: Date): string {
    const payload = Buffer.alloc(PAYLOAD_BYTES);
    payload[0] = VERSION;
    const ids = Buffer.concat([parseUuid(publicId), parseUuid(consentId)]);
    payload.set(this.seal.update(ids), 1);
    payload.writeUInt32BE(Math.ceil((now.getTime() + PREFERENCES_LINK_TTL_MS) / 1000), 33);
    const signature = signatureOf(this.secret, payload);
    return `${payload.toString("base64url")}.${signature.toString("base64url")}`;
  }

  /**
   * The grant of a token. The signature is checked under every secret, each in constant time, so
   * how long the check takes does not say which one matched. A well-formed token past its expiry
   * is refused as expired, signed or not: a link made under a key since dropped says it expired,
   * as it has, rather than that it was altered (decisions §5), and a forger learns only the
   * expiry they wrote. One within its expiry and signed under no listed secret is invalid, so an
   * expiry altered to extend a link is reported as an invalid link; one signed under an older
   * secret is refused as made before the rotation.
   */
  verify(token: string, now: Date): PreferencesGrant {
    const [encodedPayload = "", encodedSignature = "", ...rest] = token.split(".");
    const payload = Buffer.from(encodedPayload, "base64url");
    const signature = Buffer.from(encodedSignature, "base64url");
    // Canonical encodings only: base64url decoding ignores stray characters and padding bits.
    const wellFormed =
      rest.length === 0 &&
      payload.toString("base64url") === encodedPayload &&
      signature.toString("base64url") === encodedSignature &&
      payload.length === PAYLOAD_BYTES &&
      payload[0] === VERSION &&
      signature.length === SIGNATURE_BYTES;
    const signedUnder = wellFormed
      ? this.secrets.map((secret) => timingSafeEqual(signature, signatureOf(secret, payload)))
      : [];
    const expiresAt = wellFormed ? new Date(payload.readUInt32BE(33) * 1000) : undefined;
    if (expiresAt === undefined || (!signedUnder.includes(true) && expiresAt > now)) {
      throw new DomainError(
        "forbidden",
        "link_invalid",
        "This preferences link is not valid: it may have been copied incompletely or altered",
      );
    }
    if (expiresAt <= now) {
      throw new DomainError(
        "forbidden",
        "link_expired",
        "This preferences link has expired: links work for 30 minutes after a choice",
      );
    }
    if (!signedUnder[0]) {
      throw new DomainError(
        "forbidden",
        "link_retired",
        "This preferences link is no longer valid: it was made before the identity key was rotated",
      );
    }
    const ids = this.unseal.update(payload.subarray(1, 33));
    return {
      publicId: stringifyUuid(ids.subarray(0, 16)),
      consentId: stringifyUuid(ids.subarray(16, 32)),
      expiresAt,
    };
  }
}

/** A token's signature: HMAC-SHA256 of its payload under `secret`, its first 128 bits. */
function signatureOf(secret: Buffer, payload: Buffer): Buffer {
  return createHmac("sha256", secret)
    .update("consent.v1 preferences link\0")
    .update(payload)
    .digest()
    .subarray(0, SIGNATURE_BYTES);
}
