import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import { secretCheck } from "#daemon/auth/secrets.js";
import { type HeaderName, requestHeaderValue } from "#daemon/rpc/call-context.js";

/** The TCP peer of a call, put into the context by the server adapter. */
export const kPeerAddress = createContextKey<string | undefined>(undefined, {
  description: "address of the connected peer",
});

/**
 * The client IP a gateway in the same process relays (gateway/relay.ts). Context values never
 * come from the network, so this one needs no operator token to be trusted, where the
 * consent-client-ip header does.
 */
export const kRelayedClientIp = createContextKey<string | undefined>(undefined, {
  description: "client address relayed by an in-process gateway",
});

/**
 * When the call's answer has left the process (or its stream closed): set by the daemon port's
 * short way (rpc/connect-unary-route.ts), which writes its answers itself. Elsewhere (connect-es'
 * routes, the in-process transport, whose answer is a message in memory) an answer counts as
 * sent once the handler has returned it.
 */
export const kAnswerSent = createContextKey<() => Promise<void>>(() => Promise.resolve(), {
  description: "settles once the call's answer has been written",
});

/**
 * Metadata the gateway (or any caller) sends along with a call. The client-IP header is honoured
 * only when the call also carries the operator token in GATEWAY_TOKEN_HEADER: a gateway runs in
 * the operator's trust domain, any other caller is identified by its own socket address.
 */
export const CallerHeaders = {
  authorization: "authorization",
  session: "consent-session",
  origin: "consent-origin",
  team: "consent-team",
  clientIp: "consent-client-ip",
  gatewayToken: "consent-gateway-token",
} as const;

/** Who is calling, as far as the transport can tell. */
export interface Caller {
  /** Client IP (the visitor's, when relayed by a gateway). Never stored raw. */
  clientIp: string;
  /** Whether a gateway relays the call (a REST request), in this process or with the token. */
  viaGateway: boolean;
  /**
   * The call names a gateway token (GATEWAY_TOKEN_HEADER) that is not the operator token: a
   * guess at the token, or a gateway left with an old one. Such a call is refused as a failed
   * attempt (Authenticator.refuseWrongGatewayToken).
   */
  wrongGatewayToken: boolean;
  /** The bearer credential, if any: an API key or the operator token. */
  bearer: string | undefined;
  /**
   * An Authorization header that is present but not `Bearer <token>` (a bare key, `Basic …`):
   * a credential attempt that never authenticates (spec 5.1 sends keys as Bearer tokens).
   */
  unreadableCredential: boolean;
  /** A dashboard session token, if any. */
  sessionToken: string | undefined;
  /** The browser's Origin header, relayed for the session CSRF rule (decisions §2). */
  origin: string | undefined;
  /** Team chosen by an operator call. */
  team: string | undefined;
}

/**
 * Where a handler context keeps its caller once read, so the services and the Authenticator of
 * one call share one reading. A context is made for one call, so the reading lives on it: a
 * WeakMap entry per call cost the collector about as much as reading the headers.
 */
const kCaller = Symbol("caller");

/** Reads the caller from a handler context (once per call). */
export function callerOf(ctx: HandlerContext, operatorToken: string): Caller {
  const read = ctx as HandlerContext & { [kCaller]?: Caller };
  read[kCaller] ??= readCaller(ctx, operatorToken);
  return read[kCaller];
}

/**
 * The token of an `Authorization: Bearer <token>` value, if it is one (spec 5.1). Only HTTP's own
 * white space (space, tab) separates and surrounds it: JavaScript's `\s` also takes a no-break
 * space and the other Unicode spaces, which a header may carry (as Latin-1) and HTTP does not
 * count as space.
 */
export function bearerOf(authorization: string): string | undefined {
  return /^[ \t]*Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(authorization)?.[1];
}

function readCaller(ctx: HandlerContext, operatorToken: string): Caller {
  const header = (name: HeaderName) => requestHeaderValue(ctx, name);
  const authorization = header(CallerHeaders.authorization) ?? "";
  const bearer = bearerOf(authorization);
  const inProcess = ctx.values.get(kRelayedClientIp);
  const relay = inProcess === undefined ? relayedOverNetwork(ctx, operatorToken) : undefined;
  const relayedIp = relay === "wrong token" ? undefined : relay?.ip;
  return {
    clientIp: inProcess ?? relayedIp ?? ctx.values.get(kPeerAddress) ?? "unknown",
    viaGateway: inProcess !== undefined || relayedIp !== undefined,
    wrongGatewayToken: relay === "wrong token",
    bearer,
    unreadableCredential: bearer === undefined && authorization.trim() !== "",
    sessionToken: header(CallerHeaders.session) ?? undefined,
    origin: header(CallerHeaders.origin) ?? undefined,
    team: header(CallerHeaders.team) ?? undefined,
  };
}

/**
 * The client IP a gateway relays in a header with the operator token, if one does; "wrong token"
 * when the call names a gateway token that is not the operator token.
 */
function relayedOverNetwork(
  ctx: HandlerContext,
  operatorToken: string,
): { ip: string | undefined } | "wrong token" | undefined {
  const gatewayToken = requestHeaderValue(ctx, CallerHeaders.gatewayToken);
  if (gatewayToken === null) return undefined;
  if (!secretCheck(operatorToken).matches(gatewayToken)) return "wrong token";
  return { ip: requestHeaderValue(ctx, CallerHeaders.clientIp) ?? undefined };
}
