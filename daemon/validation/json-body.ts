import secureJson from "secure-json-parse";
import { DomainError, invalidRequest } from "#daemon/errors.js";

/**
 * Parses a REST body relayed verbatim by the gateway. Prototype-poisoning keys (__proto__,
 * constructor.prototype) are rejected, as for every body parsed by hand.
 *
 * @param maxBytes spec 8: over the limit is 413 invalid_request (decisions §2: checked after the
 *   rate limiter, like every other body rule).
 * @param failure how a parse failure is reported: with the invalid_request code (subject routes)
 *   or without a code (banner routes, spec 7).
 */
export function parseJsonBody(
  bytes: Uint8Array,
  maxBytes: number,
  failure: "subject" | "banner",
): unknown {
  if (bytes.byteLength > maxBytes) {
    throw tooLarge(maxBytes);
  }
  try {
    return secureJson.parse(
      Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      undefined,
      {
        protoAction: "error",
        constructorAction: "error",
      },
    );
  } catch {
    // The parser's own text may quote the body; the client gets a fixed sentence instead.
    const details = [{ field: "", message: "The request body is not valid JSON" }];
    if (failure === "subject") throw invalidRequest(details, "Request body is not valid JSON");
    throw new DomainError("invalid", "", "Request body is not valid JSON", { details });
  }
}

/** spec 8: 413 invalid_request for a body over the route's limit. */
export function tooLarge(maxBytes: number): DomainError {
  return new DomainError(
    "too_large",
    "invalid_request",
    `Request body exceeds ${maxBytes / 1024} KB`,
  );
}
