import { LOG_ROUTE_PATH, logRouteErrorBody } from "#gateway/consent-log/routes.js";
import { enveloped, errorFields } from "#gateway/envelope.js";
import { type HttpError, plainErrorBody } from "#gateway/errors.js";

/** spec 9: the versioned API's prefix. */
export const V1_PREFIX = "/api/v1";

/** Whether `path` (no query) is the versioned API's, whose answers are enveloped (decisions §6). */
export function isV1Path(path: string): boolean {
  return path === V1_PREFIX || path.startsWith(`${V1_PREFIX}/`);
}

/**
 * An error's body in the shape of the route family `path` belongs to (spec 7, decisions §5–6),
 * for an answer no route writes: the log route's `{ success: false, error, code }`, the versioned
 * API's envelope `{ data: { error, code }, version }`, and `{ error, code }` anywhere else (the
 * loader, the preferences page's address, a path nothing serves). Without a path (a request line
 * that cannot be read), the envelope.
 */
export function errorBodyAt(path: string | undefined, error: HttpError): object {
  if (path === LOG_ROUTE_PATH) return logRouteErrorBody(error);
  if (path === undefined || isV1Path(path)) return enveloped(errorFields(error));
  return plainErrorBody(error);
}
