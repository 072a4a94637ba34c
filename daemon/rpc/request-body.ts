import { parseJsonBody, tooLarge } from "#daemon/validation/json-body.js";

/** A request that may carry its REST body verbatim in `json` (see the service comments in proto/). */
interface MaybeJson {
  json?: Uint8Array;
}

/**
 * The body to validate: the relayed REST body when `json` is set, else the typed fields mapped
 * to the same JSON shape, so REST and gRPC callers meet one set of rules.
 */
export function bodyOf<R extends MaybeJson>(
  request: R,
  typed: (request: R) => unknown,
  options: { maxBytes: number; failure: "subject" | "banner" },
): unknown {
  // Presence, not length: an empty REST body is relayed as empty bytes and fails as invalid JSON.
  if (request.json !== undefined)
    return parseJsonBody(request.json, options.maxBytes, options.failure);
  const body = typed(request);
  // The same size rule as REST, measured on the JSON form the typed fields stand for.
  if (Buffer.byteLength(JSON.stringify(body)) > options.maxBytes) {
    throw tooLarge(options.maxBytes);
  }
  return body;
}
