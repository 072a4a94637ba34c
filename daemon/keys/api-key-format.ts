import { hash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";
import type { Environment } from "#daemon/keys/key-store.js";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
/** decisions §2: ck_live_ / ck_test_, 32 base62 characters, 6 base62 characters of CRC32. */
const KEY_PATTERN = /^ck_(live|test)_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$/;

/** Mints a new key for an environment: 32 uniformly random base62 characters plus checksum. */
export function generateApiKey(environment: Environment): string {
  let body = "";
  while (body.length < BODY_LENGTH) {
    for (const byte of randomBytes(48)) {
      // 248 = 4 * 62: rejecting larger bytes keeps every character equally likely.
      if (byte < 248 && body.length < BODY_LENGTH) body += BASE62[byte % 62];
    }
  }
  return `ck_${environment}_${body}${checksum(body)}`;
}

/**
 * Checks the format and checksum without any store look-up (decisions §2), so a mistyped or
 * forged key is rejected cheaply. Returns the environment the prefix names, or null.
 */
export function parseApiKey(key: string): Environment | null {
  const match = KEY_PATTERN.exec(key);
  if (!match) return null;
  const [, environment, body, sum] = match;
  return checksum(body as string) === sum ? (environment as Environment) : null;
}

function checksum(body: string): string {
  let value = crc32(body);
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** Lower-case hex SHA-256: the only form in which keys and session tokens are stored. */
export function secretHash(secret: string): string {
  return hash("sha256", secret, "hex");
}

/** Prefix and last four characters, enough for an operator to recognise a key. */
export function keyHint(key: string): string {
  return `${key.slice(0, 8)}…${key.slice(-4)}`;
}
