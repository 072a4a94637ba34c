import { createHmac } from "node:crypto";
import { signingKeyOf } from "#daemon/webhooks/webhook-secrets.js";

/** The Standard Webhooks headers of one attempt. */
export interface SignedHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` (Standard Webhooks, symmetric signature). */
export function signature(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): string {
  const mac = createHmac("sha256", signingKeyOf(secret))
    .update(`${id}.${timestampSeconds}.${body}`)
    .digest("base64");
  return `v1,${mac}`;
}

/**
 * The headers of one attempt at `at`: one signature per secret, space-separated, so a receiver
 * still holding the previous secret during a rotation verifies as well as one with the new one.
 */
export function signedHeaders(
  secrets: readonly string[],
  id: string,
  at: Date,
  body: string,
): SignedHeaders {
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": secrets.map((secret) => signature(secret, id, timestamp, body)).join(" "),
  };
}
