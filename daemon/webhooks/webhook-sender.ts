import {
  type ClientRequest,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { clipped } from "#daemon/errors.js";
import type { AddressGuard } from "#daemon/webhooks/address-guard.js";
import type { SignedHeaders } from "#daemon/webhooks/signing.js";

/** docs/webhooks.md: an attempt that has not completed in 15 s has failed. */
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
  /**
   * The exchange was ended through `signal` before the endpoint's status arrived: the outcome
   * says nothing of the endpoint (a TestWebhook whose caller left, an attempt cut by shutdown).
   */
  abandoned?: true;
}

export interface SendOptions {
  url: string;
  headers: SignedHeaders;
  body: string;
  guard: AddressGuard;
  timeoutMs?: number;
  /**
   * Keep-alive connections to reuse (the dispatcher's DeliveryAgents); without them the attempt
   * opens a connection of its own and closes it (a test send from the API).
   */
  agents?: DeliveryAgents;
  /**
   * Ends the attempt early (a TestWebhook call whose caller left, or whose deadline passed; the
   * daemon's shutdown): `abandoned`, unless the endpoint's status has arrived, which is then the
   * outcome, as at the timeout.
   */
  signal?: AbortSignal;
  /** The endpoint's team: the guard shares its host-name lookups fairly among teams. */
  tenant?: string;
}

/**
 * Attempts one daemon has in flight at most. Attempts run beside the dispatcher's passes, not
 * inside them: a slow endpoint (up to the 15 s timeout) holds only its own attempts.
 */
export const MAX_IN_FLIGHT = 128;
/** Attempts in flight to one endpoint at most (pass-limits.ts), each on a connection of its own. */
export const ATTEMPTS_PER_ENDPOINT = 32;
/**
 * Connections one daemon uses at once to one origin: as many as it has attempts in flight, so
 * endpoints that share a host (one receiving service for many teams) never wait for one another's
 * connections. An attempt that waited for a connection would spend its timeout waiting, and a
 * hanging endpoint could then fail another team's deliveries on the same host.
 */
const SOCKETS_PER_ORIGIN = MAX_IN_FLIGHT;
/** Connections one daemon keeps open to all endpoints together. */
const SOCKETS_IN_ALL = 512;
/** An idle kept-alive connection is closed after this long (sooner if the endpoint asks). */
const IDLE_SOCKET_MS = 30_000;

/**
 * The dispatcher's keep-alive connection pools, one per scheme. A connection is checked by the
 * guard when it is opened (the socket's own DNS lookup): a reused connection stays with the
 * address that was checked, so reuse gives DNS rebinding nothing to swap. An idle connection is
 * closed after 30 s, or after the endpoint's shorter Keep-Alive hint, and never keeps the
 * process alive.
 */
export class DeliveryAgents {
  readonly http = new HttpAgent(DeliveryAgents.options);
  readonly https = new HttpsAgent(DeliveryAgents.options);

  private static get options() {
    return {
      keepAlive: true,
      maxSockets: SOCKETS_PER_ORIGIN,
      maxTotalSockets: SOCKETS_IN_ALL,
      // Node applies it to idle pooled sockets only (and caps the endpoint's hint with it).
      timeout: IDLE_SOCKET_MS,
      scheduling: "lifo" as const,
    };
  }

  destroy(): void {
    this.http.destroy();
    this.https.destroy();
  }
}

/**
 * POSTs one signed event. The address is checked by the guard as the socket connects; redirects
 * are not followed (a 3xx is a failure); only a short excerpt of the body is read. Never throws:
 * every failure becomes an outcome. A reused keep-alive connection that the endpoint had closed
 * before answering at all (ECONNRESET with no response) is retried once on a new connection of
 * its own, as Node documents for `request.reusedSocket`; once any answer has begun, a failure is
 * the attempt's outcome and is never resent here.
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
  const https = url.protocol === "https:";
  const request = https ? httpsRequest : httpRequest;
  const pooled = options.agents ? (https ? options.agents.https : options.agents.http) : false;
  const body = Buffer.from(options.body, "utf8");
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  const ended: SendOutcome = {
    ok: false,
    statusCode: 0,
    error: "the call ended before the endpoint answered",
    abandoned: true,
  };
  // A call that ended before the attempt began sends nothing.
  if (options.signal?.aborted) return Promise.resolve(ended);
  return new Promise((resolve) => {
    let settled = false;
    /** The request in progress: the first, or its one resend. */
    let current: ClientRequest | undefined;
    /** Once the endpoint has answered: ends the body's reading with what has arrived so far. */
    let cutBody: (() => void) | undefined;
    const finish = (outcome: SendOutcome, destroy: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", abandon);
      // A finished exchange leaves its connection to the pool; anything else closes it.
      if (destroy) current?.destroy();
      resolve(outcome);
    };
    // Ended early, at the timeout or through the signal: an answer whose status has arrived is
    // that status, whether or not its body ends in time (a 2xx whose body stalls was acknowledged,
    // and sending it again would be a duplicate); without one, the attempt ends `unanswered`.
    const endEarly = (unanswered: SendOutcome) => (cutBody ? cutBody() : finish(unanswered, true));
    const timer = setTimeout(
      () =>
        endEarly({ ok: false, statusCode: 0, error: `no response within ${timeoutMs / 1000} s` }),
      timeoutMs,
    );
    const abandon = () => endEarly(ended);
    options.signal?.addEventListener("abort", abandon, { once: true });
    const send = (agent: HttpAgent | false) => {
      let req: ClientRequest;
      try {
        req = request(url, {
          method: "POST",
          agent,
          lookup: options.guard.lookup(!https, options.tenant),
          headers: {
            ...options.headers,
            "content-type": "application/json",
            "content-length": String(body.length),
            "user-agent": "consent-service-webhooks/1",
          },
        });
      } catch (error) {
        finish({ ok: false, statusCode: 0, error: describe(error as Error) }, false);
        return;
      }
      current = req;
      let answered = false;
      req.on("error", (error) => {
        if (current !== req) return;
        // Only a pooled connection is ever reused; the resend's own connection never is.
        const stale =
          !answered && req.reusedSocket && (error as NodeJS.ErrnoException).code === "ECONNRESET";
        if (stale && !settled) send(false);
        else finish({ ok: false, statusCode: 0, error: describe(error) }, true);
      });
      req.on("response", (response) => {
        answered = true;
        const body = readExcerpt(response);
        if (current === req) cutBody = body.cut;
        body.read.then(({ excerpt, complete }) => {
          if (current !== req) return;
          const statusCode = response.statusCode ?? 0;
          const ok = statusCode >= 200 && statusCode < 300;
          const retryAfter = response.headers["retry-after"];
          const outcome: SendOutcome = {
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
          };
          finish(outcome, !complete);
        });
      });
      req.end(body);
    };
    send(pooled);
  });
}

/**
 * The first RESPONSE_EXCERPT_BYTES of a body; the rest is never read (a longer body ends the
 * connection). `complete`: the whole body was read, so the connection may serve another attempt.
 * `cut()` ends the reading at once with what has arrived (the attempt's time is up) and closes
 * the response.
 */
function readExcerpt(response: IncomingMessage): {
  read: Promise<{ excerpt: string; complete: boolean }>;
  cut: () => void;
} {
  let cut = () => {};
  const read = new Promise<{ excerpt: string; complete: boolean }>((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const done = (complete: boolean) => {
      response.removeAllListeners("data");
      const excerpt = Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString("utf8");
      resolve({ excerpt, complete });
    };
    response.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
      if (length >= RESPONSE_EXCERPT_BYTES) {
        done(false);
        response.destroy();
      }
    });
    response.on("end", () => done(true));
    response.on("error", () => done(false));
    response.on("close", () => done(false));
    cut = () => {
      done(false);
      response.destroy();
    };
  });
  // The executor has run: `cut` is the reading's own.
  return { read, cut };
}

/**
 * An attempt's failure as a delivery keeps it (`lastError`) and TestWebhook answers it: clipped
 * as every error text is (errors.ts), since some quote at length what the endpoint or its URL
 * holds (a host name of 2,000 characters, every name on a TLS certificate that matches none).
 */
function describe(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  // The guard's refusal is worded whole, with no code of the socket's.
  const coded = code && error.name !== "RefusedAddressError";
  return clipped(coded ? `${code}: ${error.message}` : error.message);
}
