import {
  LOG_ROUTE_PATH,
  logRouteCorsHeaders,
  logRouteErrorBody,
} from "#gateway/consent-log/routes.js";
import { enveloped, errorFields, NO_SNIFF } from "#gateway/envelope.js";
import { type HttpError, plainErrorBody } from "#gateway/errors.js";
import { failurePage } from "#gateway/preferences/routes.js";
import type { UnparsedRequest } from "#gateway/unparsed-request.js";

/** spec 9: the versioned API's prefix. */
export const V1_PREFIX = "/api/v1";

/** Whether `path` (no query) is the versioned API's, whose answers are enveloped (decisions §6). */
export function isV1Path(path: string): boolean {
  return path === V1_PREFIX || path.startsWith(`${V1_PREFIX}/`);
}

/** Whether `path` (no query) is the preferences page's (decisions §5), whose answers are pages. */
export function isPreferencesPath(path: string): boolean {
  return path.startsWith("/preferences/");
}

/** An answer no route writes: its header fields (Content-Type included) and body. */
export interface FamilyAnswer {
  headers: Record<string, string>;
  body: string;
}

/**
 * A JSON answer. Each is kept by no cache: its path may be a loader's, whose answers a cache
 * could otherwise keep (loader/routes.ts).
 */
export function jsonAnswer(body: object, headers: Record<string, string> = {}): FamilyAnswer {
  return {
    headers: {
      ...headers,
      "Cache-Control": "no-store",
      "Content-Type": "application/json; charset=utf-8",
      [NO_SNIFF.name]: NO_SNIFF.value,
    },
    body: JSON.stringify(body),
  };
}

/**
 * An error's answer in the shape of the route family the request's path (`path`, no query)
 * belongs to (spec 7, decisions §5–6), for a request no route answers: under /preferences/ the
 * page's failure page with the page's headers, in the language its Accept-Language asks for
 * (English where it was not read); at the log route `{ success: false, error, code }` with the
 * route's CORS headers, its Origin echoed where it was read (so the banner's script can read the
 * answer); the versioned API's envelope `{ data: { error, code }, version }`; and `{ error, code }`
 * anywhere else (the loader, a path nothing serves). Without a request (a request line that
 * cannot be read), the envelope.
 */
export function errorAnswerAt(
  request: (UnparsedRequest & { path: string }) | undefined,
  error: HttpError,
): FamilyAnswer {
  if (request === undefined) return jsonAnswer(enveloped(errorFields(error)));
  const { path, headers, method } = request;
  if (isPreferencesPath(path)) {
    const page = failurePage(error, headers, method);
    return { headers: page.headers, body: page.html };
  }
  if (path === LOG_ROUTE_PATH) {
    return jsonAnswer(logRouteErrorBody(error), logRouteCorsHeaders(headers.origin));
  }
  if (isV1Path(path)) return jsonAnswer(enveloped(errorFields(error)));
  return jsonAnswer(plainErrorBody(error));
}
