import { randomBytes } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { failureOf, type HttpError } from "#gateway/errors.js";
import { refuseOtherMethods } from "#gateway/methods.js";
import { errorPage, preferencesPage } from "#gateway/preferences/page.js";
import { browserLanguage } from "#gateway/preferences/page-texts.js";
import { mediaTypeOf, relayOptions } from "#gateway/relay.js";

export interface PreferencesRouteOptions {
  clients: DaemonClients;
  operatorToken: string;
}

/** A submission that is not the page's form: nothing is recorded. */
const NOT_THE_FORM: HttpError = {
  status: 415,
  code: "unsupported_form",
  message: "Submit the privacy settings with the page's form",
  headers: {},
};

/** Form fields read from one submission; a banner has at most 30 categories. */
const MAX_FIELDS = 100;

const tokenOf = (request: FastifyRequest) => (request.params as { token: string }).token;

/**
 * The page's headers: no script at all, styles by nonce, no framing, and no Referer, since the
 * address itself is the credential.
 */
function sendPage(reply: FastifyReply, status: number, html: string, nonce: string) {
  return reply
    .code(status)
    .headers({
      "Content-Type": "text/html; charset=utf-8",
      "Content-Security-Policy": `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
      "Referrer-Policy": "no-referrer",
      "Cache-Control": "no-store",
      "X-Content-Type-Options": "nosniff",
    })
    .send(html);
}

/**
 * The clear page for a failure: its status, headers and a text for its code in the browser's
 * language, never internals.
 */
export function sendErrorPage(reply: FastifyReply, httpError: HttpError) {
  const nonce = randomBytes(16).toString("base64");
  const html = errorPage(httpError.code, nonce, browserLanguage(reply.request.headers));
  reply.headers(httpError.headers);
  return sendPage(reply, httpError.status, html, nonce);
}

/** A submission of the page's form (application/x-www-form-urlencoded), whatever its charset. */
function isFormSubmission(request: FastifyRequest): boolean {
  return mediaTypeOf(request) === "application/x-www-form-urlencoded";
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
  const { clients, operatorToken } = options;
  app.setErrorHandler((error, request, reply) => {
    const httpError = failureOf(request, error);
    return sendErrorPage(reply, httpError);
  });

  app.get("/preferences/:token", async (request, reply) => {
    const { view } = await clients.consentLog.getPreferences(
      { token: tokenOf(request) },
      relayOptions(request, reply, operatorToken),
    );
    const nonce = randomBytes(16).toString("base64");
    const saved = (request.query as { saved?: string }).saved === "1";
    return sendPage(reply, 200, view ? preferencesPage(view, nonce, saved) : "", nonce);
  });

  // Only the page's own form is a choice: any other body would record every optional category
  // as refused. Checked before the body is read (a missing Content-Type included); an expired or
  // altered link still gets its own page first.
  const formGate = async (request: FastifyRequest, reply: FastifyReply) => {
    if (isFormSubmission(request)) return;
    await clients.consentLog.getPreferences(
      { token: tokenOf(request) },
      relayOptions(request, reply, operatorToken),
    );
    return sendErrorPage(reply, NOT_THE_FORM);
  };
  app.post("/preferences/:token", { onRequest: formGate }, async (request, reply) => {
    const token = tokenOf(request);
    await clients.consentLog.updatePreferences(
      { token, preferences: submittedChoice(request) },
      relayOptions(request, reply, operatorToken),
    );
    return reply
      .code(303)
      .header("Location", `${encodeURIComponent(token)}?saved=1`)
      .send();
  });
  refuseOtherMethods(app, "/preferences/:token", ["GET", "POST"], sendErrorPage);
}
