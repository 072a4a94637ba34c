import {
  type DescField,
  type DescMessage,
  isFieldSet,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  invalidBody,
  parseJsonBody,
  refuseForbiddenKeys,
  tooLarge,
} from "#daemon/validation/json-body.js";

/**
 * The fields a request may set beside `json`: they are not part of the REST body (the path's
 * id, the browser's Origin and Referer, the form of the answer), and mean the same in every
 * message that has them. Every other field is one of the body's.
 */
const BESIDE_JSON = new Set(["json", "id", "requestOrigin", "consentStateAsJson"]);

/** Each request message's body fields, found once. */
const bodyFields = new WeakMap<DescMessage, DescField[]>();

function bodyFieldsOf(schema: DescMessage): DescField[] {
  let fields = bodyFields.get(schema);
  if (!fields) {
    fields = schema.fields.filter((field) => !BESIDE_JSON.has(field.localName));
    bodyFields.set(schema, fields);
  }
  return fields;
}

/**
 * The body to validate: the relayed REST body when `json` is set, else the typed fields mapped
 * to the same JSON shape, so REST and gRPC callers meet one set of rules. A request that sets
 * `json` and a typed body field too is refused (see the service comments in proto/): the relayed
 * JSON would silently override it.
 */
export function bodyOf<Desc extends DescMessage>(
  schema: Desc,
  request: MessageShape<Desc> & { json?: Uint8Array },
  typed: (request: MessageShape<Desc>) => unknown,
  options: { maxBytes: number; failure: "subject" | "banner" },
): unknown {
  // Presence, not length: an empty REST body is relayed as empty bytes and fails as invalid JSON.
  if (request.json !== undefined) {
    const beside = bodyFieldsOf(schema).filter((field) => isFieldSet(request, field));
    if (beside.length > 0) {
      throw invalidBody(
        options.failure,
        "Request sets both json and body fields",
        beside.map((field) => ({
          field: field.jsonName,
          message: "Must be unset in a request that carries the body in json",
        })),
      );
    }
    return parseJsonBody(request.json, options.maxBytes, options.failure);
  }
  refuseForbiddenKeys(request, options.failure);
  const body = typed(request);
  // The same size rule as REST, measured on the JSON form the typed fields stand for.
  if (Buffer.byteLength(JSON.stringify(body)) > options.maxBytes) {
    throw tooLarge(options.maxBytes);
  }
  return body;
}
