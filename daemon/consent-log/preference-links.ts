import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { parse as parseUuid, stringify as stringifyUuid } from "uuid";
import { DomainError } from "#daemon/errors.js";

/** decisions §5: a managePreferences link works for 30 minutes. */
export const PREFERENCES_LINK_TTL_MS = 30 * 60_000;

/** The token format; version 1 (the payload in clear, signed) is no longer read. */
const VERSION = 2;
/** Random per token: the token's own key is derived from it, so no key ever encrypts twice. */
const SALT_BYTES = 16;
/** publicId (16) + consentId (16) + expiry in Unix seconds (4). */
const PAYLOAD_BYTES = 36;
/** AES-GCM's full tag. */
const TAG_BYTES = 16;
const TOKEN_BYTES = 1 + SALT_BYTES + PAYLOAD_BYTES + TAG_BYTES;
/** Each token has a key of its own, so the nonce may be fixed. */
const NONCE = Buffer.alloc(12);

/** What a valid link grants: changing one consent record of one banner until `expiresAt`. */
export interface PreferencesGrant {
  publicId: string;
  consentId: string;
  expiresAt: Date;
}

/**
 * Makes and opens the tokens of managePreferences links (decisions §5). A token is one base64url
 * string: the format's version, a random salt, and the two UUIDs and the expiry encrypted and
 * authenticated with AES-256-GCM under a key derived from the salt and a secret every daemon on
 * the store shares, so any daemon can open a link another one made. The address reveals nothing
 * (not even the consentId, which it would otherwise hand to whoever sees a history, a log or a
 * shared screenshot), and any change to it is refused. Nothing is stored per link.
 */
export class PreferenceLinks {
  private readonly masterKey: Buffer;

  constructor(secret: Buffer) {
    this.masterKey = createHmac("sha256", secret).update("consent.v1 preferences link").digest();
  }

  /** A token for the consent record, valid for 30 minutes from `now`. */
  sign(publicId: string, consentId: string, now: Date): string {
    const payload = Buffer.alloc(PAYLOAD_BYTES);
    payload.set(parseUuid(publicId), 0);
    payload.set(parseUuid(consentId), 16);
    payload.writeUInt32BE(Math.ceil((now.getTime() + PREFERENCES_LINK_TTL_MS) / 1000), 32);
    const header = Buffer.from([VERSION]);
    const salt = randomBytes(SALT_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.keyOf(salt), NONCE);
    cipher.setAAD(header);
    const sealed = Buffer.concat([cipher.update(payload), cipher.final()]);
    return Buffer.concat([header, salt, sealed, cipher.getAuthTag()]).toString("base64url");
  }

  /**
   * The grant of a token. It is authenticated before the expiry is read, so an altered expiry
   * is reported as an invalid link, never as an expired one.
   */
  verify(token: string, now: Date): PreferencesGrant {
    const payload = this.open(token);
    if (!payload) {
      throw new DomainError(
        "forbidden",
        "link_invalid",
        "This preferences link is not valid: it may have been copied incompletely or altered",
      );
    }
    const expiresAt = new Date(payload.readUInt32BE(32) * 1000);
    if (expiresAt <= now) {
      throw new DomainError(
        "forbidden",
        "link_expired",
        "This preferences link has expired: links work for 30 minutes after a choice",
      );
    }
    return {
      publicId: stringifyUuid(payload.subarray(0, 16)),
      consentId: stringifyUuid(payload.subarray(16, 32)),
      expiresAt,
    };
  }

  /** The payload of a whole, unaltered token of this format; undefined for anything else. */
  private open(token: string): Buffer | undefined {
    const bytes = Buffer.from(token, "base64url");
    // Canonical encodings only: base64url decoding ignores stray characters and padding bits.
    if (bytes.length !== TOKEN_BYTES || bytes.toString("base64url") !== token) return undefined;
    if (bytes[0] !== VERSION) return undefined;
    const salt = bytes.subarray(1, 1 + SALT_BYTES);
    const sealed = bytes.subarray(1 + SALT_BYTES, 1 + SALT_BYTES + PAYLOAD_BYTES);
    const decipher = createDecipheriv("aes-256-gcm", this.keyOf(salt), NONCE);
    decipher.setAAD(bytes.subarray(0, 1));
    // OpenSSL compares the tag in constant time.
    decipher.setAuthTag(bytes.subarray(TOKEN_BYTES - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(sealed), decipher.final()]);
    } catch {
      return undefined;
    }
  }

  private keyOf(salt: Buffer): Buffer {
    return createHmac("sha256", this.masterKey).update(salt).digest();
  }
}
