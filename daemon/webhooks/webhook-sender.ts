import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import type { SignedHeaders } from "#daemon/webhooks/signing.js";

/** issue 5: an attempt that has not completed in 15 s has failed. */
export const DELIVERY_TIMEOUT_MS = 15_000;
/** At most this much of a response body is read and kept. */
export const RESPONSE_EXCERPT_BYTES = 256;

/** What one POST to an endpoint came to. */
export interface SendOutcome {
  /** Only a 2xx answer is a success. */
  ok: boolean;
  /** 0 when no response arrived. */
  statusCode: number;
  /** Why the attempt failed; undefined on success. */
  error?: string;
  /** At most RESPONSE_EXCERPT_BYTES of the response body, as text. */
  excerpt?: string;
  /** The response's Retry-After header. */
  retryAfter?: string;
}

export interface SendOptions {
  url: string;
  headers: SignedHeaders;
  body: string;
  guard: AddressGuard;
  timeoutMs?: number;
}

/**
 * POSTs one signed event. The address is checked by the guard as the socket connects; redirects
 * are not followed (a 3xx is a failure); only a short excerpt of the body is read, then the
 * response is dropped. Never throws: every failure becomes an outcome.
 */
export function sendWebhook(options: SendOptions): Promise<SendOutcome> {
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    return Promise.resolve({ ok: false, statusCode: 0, error: "the endpoint URL is not valid" });
  }
  const refusal = options.guard.checkUrl(url);
  if (refusal) return Promise.resolve({ ok: false, statusCode: 0, error: refusal });
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  const body = Buffer.from(options.body, "utf8");
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: SendOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(outcome);
    };
    const req = request(url, {
      method: "POST",
      // A fresh connection per attempt: every attempt resolves and checks the address anew.
      agent: false,
      lookup: options.guard.lookup(url.protocol === "http:"),
      headers: {
        ...options.headers,
        "content-type": "application/json",
        "content-length": String(body.length),
        "user-agent": "consent-service-webhooks/1",
      },
    });
    const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
    const timer = setTimeout(
      () => finish({ ok: false, statusCode: 0, error: `no response within ${timeoutMs / 1000} s` }),
      timeoutMs,
    );
    req.on("error", (error) => finish({ ok: false, statusCode: 0, error: describe(error) }));
    req.on("response", (response) => {
      readExcerpt(response).then((excerpt) => {
        const statusCode = response.statusCode ?? 0;
        const ok = statusCode >= 200 && statusCode < 300;
        const retryAfter = response.headers["retry-after"];
        finish({
          ok,
          statusCode,
          excerpt,
          ...(retryAfter !== undefined && { retryAfter }),
          ...(!ok && {
            error:
              statusCode >= 300 && statusCode < 400
                ? `the endpoint answered ${statusCode}; redirects are not followed`
                : `the endpoint answered ${statusCode}`,
          }),
        });
      });
    });
    req.end(body);
  });
}

/** The first RESPONSE_EXCERPT_BYTES of a body; the rest is never read. */
function readExcerpt(response: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const done = () => {
      response.removeAllListeners("data");
      resolve(Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString("utf8"));
    };
    response.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
      if (length >= RESPONSE_EXCERPT_BYTES) {
        done();
        response.destroy();
      }
    });
    response.on("end", done);
    response.on("error", done);
    response.on("close", done);
  });
}

function describe(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (error.name === "RefusedAddressError") return error.message;
  return code ? `${code}: ${error.message}` : error.message;
}
