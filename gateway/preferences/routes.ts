import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { httpUrl, readOriginHeader } from "#daemon/consent-log/request-origin.js";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { failureOf, type HttpError, isPassingOutage } from "#gateway/errors.js";
import { refuseOtherMethods } from "#gateway/methods.js";
import { errorPage, preferencesPage } from "#gateway/preferences/page.js";
import { browserLanguage } from "#gateway/preferences/page-texts.js";
import { mediaTypeOf, type Relay, readOptions, relayOptions } from "#gateway/relay.js";

export interface PreferencesRouteOptions {
  clients: DaemonClients;
  /** How requests reach the daemon with their client context (relay.ts). */
  relay: Relay;
}

/** A submission that is not the page's form: nothing is recorded. */
const NOT_THE_FORM: HttpError = {
  status: 415,
  code: "unsupported_form",
  message: "Submit the privacy settings with the page's form",
  headers: {},
};

/**
 * A submission another site made the browser send (a cross-site form posted to a link it learned):
 * nothing is recorded. The page says the choices were not saved, that they are saved only from
 * the page itself, and links back to it.
 */
const NOT_FROM_THE_PAGE: HttpError = {
  status: 403,
  code: "not_from_the_page",
  message: "Save the privacy settings from this service's own page",
  headers: {},
};

/** Form fields read from one submission; a banner has at most 30 categories. */
const MAX_FIELDS = 100;

const tokenOf = (request: FastifyRequest) => (request.params as { token: string }).token;

/**
 * The page's headers: no script at all, styles by nonce, no framing, and no Referer to any other
 * origin, since the address itself is the credential. `same-origin` rather than `no-referrer`: under
 * no-referrer a browser sends the page's own form with `Origin: null`, which the cross-site check
 * must refuse where the browser sends no Sec-Fetch-Site (plain http, older browsers).
 */
function pageHeaders(nonce: string): Record<string, string> {
  return {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    // frame-ancestors' older twin, for browsers that predate it: a page that saves choices
    // must never be framed under another site's clicks.
    "X-Frame-Options": "DENY",
  };
}

function sendPage(reply: FastifyReply, status: number, html: string, nonce: string) {
  return reply.code(status).headers(pageHeaders(nonce)).send(html);
}

/**
 * The failure a page names: a visitor's own (a link, a limit, a submission) by its code, a body
 * over the limit as `body_too_large` (its REST code, `invalid_request`, is a 400's too, and the
 * page says which happened); the service's by what waiting does: `unavailable` for an outage that
 * passes by itself (again in a moment), `other` for a fault or an outage that lasts until the
 * operator acts, such as the daemon refusing this gateway's token (later), both whatever their
 * REST code.
 */
function pageFailureOf(httpError: HttpError): string | undefined {
  if (httpError.status === 413) return "body_too_large";
  if (httpError.status < 500) return httpError.code;
  return isPassingOutage(httpError) ? "unavailable" : "other";
}

/**
 * The clear page for a failure answering a request with these header fields and method: its text
 * in the browser's language (English where Accept-Language names none the page ships, or was not
 * read), never internals, a failed POST, a submission of the form, saying it was not saved; and
 * the page's header fields. Also for a request under /preferences/ the gateway cannot parse
 * (gateway/route-families.ts).
 */
export function failurePage(
  httpError: HttpError,
  requestHeaders: Record<string, string | string[] | undefined>,
  method: string | undefined,
): { html: string; headers: Record<string, string> } {
  const nonce = randomBytes(16).toString("base64");
  const failure = pageFailureOf(httpError);
  const html = errorPage(failure, nonce, browserLanguage(requestHeaders), method === "POST");
  return { html, headers: pageHeaders(nonce) };
}

/** Answers with the failure page for `httpError` (failurePage), its status and headers. */
export function sendErrorPage(reply: FastifyReply, httpError: HttpError) {
  const { headers, method } = reply.request;
  const page = failurePage(httpError, headers, method);
  reply.headers(httpError.headers);
  return reply.code(httpError.status).headers(page.headers).send(page.html);
}

/**
 * A submission of the page's form: application/x-www-form-urlencoded, whatever its charset, and
 * not compressed (no browser compresses a form; a compressed body would read as no category
 * ticked, recording every optional one as refused).
 */
function isFormSubmission(request: FastifyRequest): boolean {
  const coding = request.headers["content-encoding"];
  return (
    mediaTypeOf(request) === "application/x-www-form-urlencoded" &&
    (coding === undefined || /^[ \t]*identity[ \t]*$/i.test(coding))
  );
}

/**
 * Whether a submission comes from a page of another origin (decisions §5: the page is the
 * service's own). A browser's Sec-Fetch-Site decides when sent: only `same-origin` is the page.
 * Without it (plain http, older browsers), an Origin must be the gateway's own: the scheme and
 * host the request came to, taken from X-Forwarded-Proto and X-Forwarded-Host only when a proxy
 * of CONSENT_TRUST_PROXY sent them (Fastify's trustProxy), like the client IP. The Origin is read
 * as the log route reads it (readOriginHeader): `null` (a sandboxed frame, a page without a
 * referrer) names no site of ours, and an Origin no browser sends (a path, two origins, a default
 * port written out) is refused, never read as the origin it starts with. A request with no Origin
 * and no Sec-Fetch-Site is no browser's form, so no site can have sent it on a visitor's behalf:
 * it is accepted.
 */
function isFromAnotherSite(request: FastifyRequest): boolean {
  const site = request.headers["sec-fetch-site"];
  if (site !== undefined) return site !== "same-origin";
  const origin = readOriginHeader(request.headers.origin);
  if (origin.kind === "absent") return false;
  const own = httpUrl(`${request.protocol}://${request.host}`)?.origin;
  return origin.kind !== "origin" || own === undefined || origin.origin !== own;
}

/** The categories ticked in the submitted form (application/x-www-form-urlencoded). */
function submittedChoice(request: FastifyRequest): Record<string, boolean> {
  const text = Buffer.isBuffer(request.body) ? request.body.toString("utf8") : "";
  const names = new URLSearchParams(text).getAll("category").slice(0, MAX_FIELDS);
  return Object.fromEntries(names.map((name) => [name, true]));
}

/**
 * GET and POST /preferences/{token} (decisions §5): the page behind a managePreferences link.
 * A saved form redirects back to the page (303), so reloading it never records twice. Any
 * failure, an expired or altered link above all, is a plain page with a 4xx, never a trace.
 */
export async function preferencesRoutes(app: FastifyInstance, options: PreferencesRouteOptions) {
  const { clients, relay } = options;
  app.setErrorHandler((error, request, reply) => {
    const httpError = failureOf(request, error);
    return sendErrorPage(reply, httpError);
  });

  app.get("/preferences/:token", async (request, reply) => {
    const { view } = await clients.consentLog.getPreferences(
      { token: tokenOf(request) },
      readOptions(request, reply, relay),
    );
    const nonce = randomBytes(16).toString("base64");
    // The saved notice only right after a save: `saved` names the row the save wrote, and that
    // row is still the current choice (an address from the history, or typed, shows none).
    const savedRow = (request.query as { saved?: unknown }).saved;
    const saved = !!view?.consentLogId && savedRow === view.consentLogId;
    return sendPage(reply, 200, view ? preferencesPage(view, nonce, saved) : "", nonce);
  });

  // A form another site posts to a link it learned (a Referer, the history) is no choice of the
  // visitor's: refused before the body is read and before the daemon is asked anything.
  const sameOriginGate = async (request: FastifyRequest, reply: FastifyReply) => {
    if (isFromAnotherSite(request)) return sendErrorPage(reply, NOT_FROM_THE_PAGE);
  };
  // Only the page's own form is a choice: any other body would record every optional category
  // as refused. Checked before the body is read (a missing Content-Type included); an expired or
  // altered link still gets its own page first.
  const formGate = async (request: FastifyRequest, reply: FastifyReply) => {
    if (isFormSubmission(request)) return;
    await clients.consentLog.getPreferences(
      { token: tokenOf(request) },
      readOptions(request, reply, relay),
    );
    return sendErrorPage(reply, NOT_THE_FORM);
  };
  app.post(
    "/preferences/:token",
    { onRequest: [sameOriginGate, formGate] },
    async (request, reply) => {
      const token = tokenOf(request);
      const { consentLogId } = await clients.consentLog.updatePreferences(
        // Global Privacy Control: browsers that send the signal send `Sec-GPC: 1` with every
        // request, the form's too.
        { token, preferences: submittedChoice(request), gpc: request.headers["sec-gpc"] === "1" },
        relayOptions(request, reply, relay),
      );
      return reply
        .code(303)
        .header(
          "Location",
          `${encodeURIComponent(token)}?saved=${encodeURIComponent(consentLogId)}`,
        )
        .send();
    },
  );
  refuseOtherMethods(app, "/preferences/:token", ["GET", "POST"], sendErrorPage);
}
