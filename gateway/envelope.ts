import type { FastifyReply } from "fastify";
import type { HttpError } from "#gateway/errors.js";

/** spec 9: the only deployed version. */
export const API_VERSION = "v1";

/** spec 9.4: headers of every response of the versioned API. */
export function setVersionHeaders(reply: FastifyReply): void {
  reply.header("API-Version", API_VERSION);
  reply.header("API-Supported-Versions", API_VERSION);
}

/**
 * Sent with every answer of the gateway (app.ts's onSend hook, route-families.ts's raw answers):
 * a browser never reads a JSON answer, an error's included, as a script or a page (a body that
 * echoes a request's text would otherwise be one an attacker could write).
 */
export const NO_SNIFF = { name: "X-Content-Type-Options", value: "nosniff" } as const;

/** spec 4: `{ data: <payload>, version: "v1" }`. */
export function enveloped(data: unknown): { data: unknown; version: string } {
  return { data, version: API_VERSION };
}

/** Sends `data` in the envelope (spec 4). */
export function sendData(reply: FastifyReply, status: number, data: unknown): FastifyReply {
  return reply.code(status).send(enveloped(data));
}

/** What follows `data` in the envelope's JSON text. */
const ENVELOPE_END = `},"version":${JSON.stringify(API_VERSION)}}`;

/**
 * sendData for a `data` object one of whose members is JSON text already (a subject's state as
 * the daemon sent it, consent_state_json): the text goes into the body as it is, between the
 * members of `before` and those of `after`, and the body is what sendData would have sent.
 */
export function sendDataWithJsonMember(
  reply: FastifyReply,
  status: number,
  data: {
    before: Record<string, unknown>;
    name: string;
    json: string;
    after: Record<string, unknown>;
  },
): FastifyReply {
  const members = [
    JSON.stringify(data.before).slice(1, -1),
    `${JSON.stringify(data.name)}:${data.json}`,
    JSON.stringify(data.after).slice(1, -1),
  ].filter((member) => member !== "");
  return reply
    .code(status)
    .type("application/json; charset=utf-8")
    .send(`{"data":{${members.join(",")}${ENVELOPE_END}`);
}

/** spec 7: the error fields of a response body, in the order the spec lists them. */
export function errorFields(error: HttpError): Record<string, unknown> {
  const fields: Record<string, unknown> = { error: error.message };
  if (error.code) fields.code = error.code;
  if (error.details) fields.details = error.details;
  if (error.current) fields.current = error.current;
  return fields;
}

/** spec 7: the 401 codes of a key that was sent and refused (spec 5.4). */
const REFUSED_KEY_CODES = new Set(["invalid_key", "revoked_key", "expired_key"]);

/**
 * The challenge of a 401 (RFC 9110 15.5.2: a 401 carries one; RFC 6750 3 writes it for a bearer
 * token): `error="invalid_token"` for a key that was sent and refused (malformed, unknown,
 * revoked, expired), none where no usable credential was sent. Some clients fail on a 401 without
 * it before reading its body (Android's HttpURLConnection: "No authentication challenges found").
 */
function bearerChallenge(code: string | undefined): string {
  return code !== undefined && REFUSED_KEY_CODES.has(code)
    ? 'Bearer error="invalid_token"'
    : "Bearer";
}

/** spec 7: the error envelope `{ data: { error, code, details? }, version: "v1" }`. */
export function sendEnvelopedError(reply: FastifyReply, error: HttpError): FastifyReply {
  reply.headers(error.headers);
  if (error.status === 401) reply.header("WWW-Authenticate", bearerChallenge(error.code));
  return sendData(reply, error.status, errorFields(error));
}
