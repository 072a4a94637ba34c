import { createHmac, timingSafeEqual } from "node:crypto";
import { parse as parseUuid, stringify as stringifyUuid } from "uuid";
import { DomainError } from "#daemon/errors.js";

/** decisions §5: a managePreferences link works for 30 minutes. */
export const PREFERENCES_LINK_TTL_MS = 30 * 60_000;

const VERSION = 1;
/** version (1) + publicId (16) + consentId (16) + expiry in Unix seconds (4). */
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
 * Signs and checks the tokens of managePreferences links (decisions §5). A token is
 * `<payload>.<signature>`, both base64url: the payload packs the two UUIDs and the expiry in 37
 * bytes, the signature is an HMAC under a secret every daemon on the store shares, so any daemon
 * can check a link another one made. Nothing is stored per link.
 */
export class PreferenceLinks {
  constructor(private readonly secret: Buffer) {}

  /** A token for the consent record, valid for 30 minutes from `now`. */
  sign(publicId: string, consentId: string, now: Date): string {
    const payload = Buffer.alloc(PAYLOAD_BYTES);
    payload[0] = VERSION;
    payload.set(parseUuid(publicId), 1);
    payload.set(parseUuid(consentId), 17);
    payload.writeUInt32BE(Math.ceil((now.getTime() + PREFERENCES_LINK_TTL_MS) / 1000), 33);
    return `${payload.toString("base64url")}.${this.signature(payload).toString("base64url")}`;
  }

  /**
   * The grant of a token. The signature is checked before the expiry, so an altered expiry is
   * reported as an invalid link, never as an expired one.
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
    if (!wellFormed || !timingSafeEqual(signature, this.signature(payload))) {
      throw new DomainError(
        "forbidden",
        "link_invalid",
        "This preferences link is not valid: it may have been copied incompletely or altered",
      );
    }
    const expiresAt = new Date(payload.readUInt32BE(33) * 1000);
    if (expiresAt <= now) {
      throw new DomainError(
        "forbidden",
        "link_expired",
        "This preferences link has expired: links work for 30 minutes after a choice",
      );
    }
    return {
      publicId: stringifyUuid(payload.subarray(1, 17)),
      consentId: stringifyUuid(payload.subarray(17, 33)),
      expiresAt,
    };
  }

  private signature(payload: Buffer): Buffer {
    return createHmac("sha256", this.secret)
      .update("consent.v1 preferences link\0")
      .update(payload)
      .digest()
      .subarray(0, SIGNATURE_BYTES);
  }
}
