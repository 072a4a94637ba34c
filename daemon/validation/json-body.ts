import { isUtf8 } from "node:buffer";
import secureJson from "secure-json-parse";
import { DomainError, invalidRequest, type Violation } from "#daemon/errors.js";

/**
 * Parses a REST body relayed verbatim by the gateway. Prototype-poisoning keys (__proto__,
 * constructor.prototype) are rejected, as for every body parsed by hand, with a message of their
 * own: the body is valid JSON, and a client told otherwise would look for the wrong mistake.
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
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // RFC 8259 §8.1: JSON exchanged between systems is UTF-8. Decoding other bytes would turn each
  // invalid sequence into U+FFFD, so two different subject ids could name one record; they are
  // refused as not JSON instead. A UTF-8 BOM is valid UTF-8 and is still skipped by the parser.
  if (!isUtf8(text)) {
    throw notJson(failure);
  }
  try {
    return secureJson.parse(text, undefined, {
      protoAction: "error",
      constructorAction: "error",
    });
  } catch {
    // The parser's own text may quote the body; the client gets a fixed sentence instead.
    // safeParse tells the two failures apart: null for a forbidden key in valid JSON, undefined
    // for text that is not JSON (valid JSON `null` parsed above without a failure).
    if (secureJson.safeParse(text) === null) throw forbiddenKey(failure);
    throw notJson(failure);
  }
}

function forbiddenKey(failure: "subject" | "banner"): DomainError {
  return invalidBody(failure, "Request body contains a forbidden key", [
    {
      field: "",
      message: "The request body must not contain a __proto__ or constructor.prototype key",
    },
  ]);
}

/**
 * The rule of parseJsonBody for a request decoded from protobuf (gRPC, or Connect's JSON): a map
 * entry named `__proto__` (a banner's texts, say) is decoded by protobuf-es into the prototype of
 * the map, leaving no own key while reads of other keys may find the entry's fields. Such a map,
 * an own `__proto__` key, or a `constructor` holding a `prototype` is refused as REST refuses the
 * same body. The decoder drops a `google.protobuf.Struct` entry named `__proto__` (a subject's
 * state) before any code sees it, so the state is validated and stored without it.
 */
export function refuseForbiddenKeys(message: unknown, failure: "subject" | "banner"): void {
  if (hasForbiddenKey(message)) throw forbiddenKey(failure);
}

function hasForbiddenKey(value: unknown): boolean {
  if (typeof value !== "object" || value === null || ArrayBuffer.isView(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    return prototype !== Array.prototype || value.some(hasForbiddenKey);
  }
  if (prototype !== Object.prototype && prototype !== null) return true;
  for (const key of Object.keys(value)) {
    const inner = (value as Record<string, unknown>)[key];
    if (key === "__proto__") return true;
    if (key === "constructor" && typeof inner === "object" && inner !== null) {
      if (Object.hasOwn(inner, "prototype")) return true;
    }
    if (hasForbiddenKey(inner)) return true;
  }
  return false;
}

function notJson(failure: "subject" | "banner"): DomainError {
  return invalidBody(failure, "Request body is not valid JSON", [
    { field: "", message: "The request body is not valid JSON" },
  ]);
}

/** A body that cannot be read: 400 with the invalid_request code or, on banner routes, none. */
export function invalidBody(
  failure: "subject" | "banner",
  error: string,
  details: Violation[],
): DomainError {
  if (failure === "subject") return invalidRequest(details, error);
  return new DomainError("invalid", "", error, { details });
}

/** spec 8: 413 invalid_request for a body over the route's limit. */
export function tooLarge(maxBytes: number): DomainError {
  return new DomainError(
    "too_large",
    "invalid_request",
    `Request body exceeds ${maxBytes / 1024} KB`,
  );
}

/**
 * The text decoder of connect-es' JSON codec on the daemon's port (Connect's `application/json`,
 * gRPC's and gRPC-Web's `+json`), holding a request message to parseJsonBody's rule: bytes that
 * are not UTF-8 (RFC 8259 §8.1) are refused rather than decoded into U+FFFD, which would let two
 * different subject ids name one record. connect-es answers the throw `invalid_argument`.
 */
export const utf8JsonDecoder = {
  decode(input: Uint8Array = new Uint8Array(0)): string {
    if (!isUtf8(input)) throw new Error("Request message is not valid UTF-8 JSON");
    return utf8.decode(input);
  },
};
const utf8 = new TextDecoder();
