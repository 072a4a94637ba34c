import type { HandlerContext } from "@connectrpc/connect";
import { AttemptsInFlight } from "#daemon/auth/attempts-in-flight.js";
import { type Caller, callerOf } from "#daemon/auth/caller.js";
import { planIncludesCrossDevice, type Scope } from "#daemon/auth/scopes.js";
import { digestsEqual, type SecretCheck, secretCheck } from "#daemon/auth/secrets.js";
import type { Clock } from "#daemon/clock.js";
import {
  DomainError,
  type FailureExtras,
  type LockedOutAddress,
  type RateLimitState,
} from "#daemon/errors.js";
import { parseApiKey, secretHash } from "#daemon/keys/api-key-format.js";
import { type ApiKeyRecord, type Environment, keyExpired } from "#daemon/keys/key-store.js";
import {
  type ClientIpHasher,
  type FixedWindowLimiter,
  KEY_WINDOW_MS,
  MINUTE_MS,
  planLimit,
  rateLimited,
  retryAfterSeconds,
} from "#daemon/limits/rate-limiter.js";
import type { SessionRecord } from "#daemon/sessions/session-store.js";
import type { Store } from "#daemon/store/store.js";
import type { Team } from "#daemon/teams/team-store.js";

/** spec 8: failed authentication attempts allowed per client IP per minute. */
const FAILED_AUTH_LIMIT = 10;
/** What a client past that limit is told: its own credentials may be fine (spec 8). */
const FAILED_AUTH_LIMITED = `Too many failed authentication attempts from this address (${FAILED_AUTH_LIMIT} a minute)`;
/** spec 8: banner requests per client IP per 15 minutes without an API key (sessions). */
const SESSION_IP_LIMIT = 100;

/** spec 8: the 429 of an address past the failed-authentication limit, saying whose it is. */
function lockedOut(address: AttemptAddress, retryAfter: number): DomainError {
  return rateLimited(retryAfter, { what: FAILED_AUTH_LIMITED, lockedOut: address.whose });
}

/**
 * A refused credential: its machine code and its sentence (decisions §2), and what its ErrorInfo
 * says beyond them.
 */
type Refusal = readonly [code: string, message: string, extras?: FailureExtras];

const UNKNOWN_KEY: Refusal = ["invalid_key", "The API key is malformed or unknown"];
const SESSION_REFUSED: Refusal = [
  "unauthorized",
  "The dashboard session is invalid, expired or revoked",
];

const REVOKED_KEY: Refusal = ["revoked_key", "The API key has been revoked"];
const EXPIRED_KEY: Refusal = ["expired_key", "The API key has expired"];
/**
 * A gateway token that is not the operator token. A stand-alone gateway reads the refusal from
 * the ErrorInfo (gateway/token-watch.ts); the words are for people and grpc-js callers.
 */
const WRONG_GATEWAY_TOKEN: Refusal = [
  "unauthorized",
  "The consent-gateway-token is not this daemon's operator token",
  { operatorTokenRefusal: "wrong gateway token" },
];
/**
 * An operator call without the operator token as its Bearer credential. To one that presents no
 * credential it is no failed attempt and no lockout holds it back (spec 8), so a stand-alone
 * gateway's token probe, which presents none, reads it as its gateway token taken
 * (gateway/token-watch.ts).
 */
const OPERATOR_TOKEN_NEEDED: Refusal = [
  "unauthorized",
  "This call needs the operator token",
  { operatorTokenRefusal: "bearer needed" },
];

/**
 * Why a found key may not be used at `now`, if it may not: revoked, then expired. A revocation,
 * like a rotation with no grace period (keyExpired), holds from the moment it is stored, whatever
 * time it records: the revoking daemon's clock may run ahead of this one's (spec 5.4: a revoked
 * key is refused).
 */
function keyRefusal(
  key: Pick<ApiKeyRecord, "revokedAt" | "expiresAt" | "replacedAt">,
  now: Date,
): Refusal | undefined {
  if (key.revokedAt) return REVOKED_KEY;
  if (keyExpired(key, now)) return EXPIRED_KEY;
  return undefined;
}

/**
 * The client address a caller's credential attempts count against (spec 8): the one a gateway
 * relays with the operator token, else the calling connection's own.
 */
interface AttemptAddress {
  /** The address's counter bucket (an HMAC of the client, never the address). */
  bucket: string;
  /** Whose address it is, which a lockout tells the caller (a gateway reads it). */
  whose: LockedOutAddress;
}

/** A credential judged acceptable, before the checks of what it may do. */
type Credential =
  | { kind: "operator" }
  | { kind: "key"; key: ApiKeyRecord }
  | { kind: "session"; session: SessionRecord };

/** Whether a found session may be used at `now`. */
function sessionLive(session: { revokedAt: Date | null; expiresAt: Date }, now: Date): boolean {
  return !session.revokedAt && session.expiresAt > now;
}

export type Principal =
  | { kind: "key"; keyId: string; environment: Environment; scopes: readonly string[] }
  | { kind: "session"; sessionId: string }
  | { kind: "operator" };

/** A caller that passed every check of decisions §2 up to and including the rate limiter. */
export interface Authorized {
  principal: Principal;
  team: Team;
  caller: Caller;
  /** Figures of the limiter that admitted the call; unset for operator calls. */
  rateLimit?: RateLimitState;
}

/** What an operation demands of its caller. */
export interface Requirement {
  scope: Scope;
  /** Writes are refused to test keys (spec 5.2) and need a same-origin session (decisions §2). */
  write: boolean;
  /** The team's plan must include cross-device consent (the subject endpoints). */
  crossDevice?: boolean;
  /** A dashboard session may stand in for a key (the banner endpoints). */
  session?: boolean;
}

export interface AuthenticatorOptions {
  store: Store;
  limiter: FixedWindowLimiter;
  ipHasher: ClientIpHasher;
  clock: Clock;
  operatorToken: string;
  /** Origin of CONSENT_BASE_URL: the only Origin a cookie-authenticated write may carry. */
  baseOrigin: string;
}

/**
 * Runs the checks of decisions §2 in their order: credential (401) → scope → test key on a write
 * → plan (403) → rate limiter (429, after which X-RateLimit-* figures travel with the response).
 * Body validation and the operation itself follow in the service.
 */
export class Authenticator {
  /** The operator token, hashed once. */
  private readonly operator: SecretCheck;
  /** Credential judgements running per client address (attempt). */
  private readonly attempts = new AttemptsInFlight();

  constructor(private readonly options: AuthenticatorOptions) {
    this.operator = secretCheck(options.operatorToken);
  }

  async authorize(ctx: HandlerContext, requirement: Requirement): Promise<Authorized> {
    const caller = await this.refuseWrongGatewayToken(ctx);
    const presented =
      caller.bearer !== undefined ||
      caller.unreadableCredential ||
      (caller.sessionToken !== undefined && requirement.session);
    if (presented) {
      // spec 8: the failed-authentication limit applies to attempts; a request that presents no
      // credential is not one, and gets its 401 below even from a blocked IP (docs/behaviour.md).
      // A blocked address is refused whatever it presents, the operator token included: else the
      // right token would answer differently from a wrong one, and guesses would go unlimited.
      const address = this.addressOf(caller);
      const credential = await this.attempt(address, ctx, () => this.judge(caller, address));
      if (credential.kind === "operator") {
        return { principal: { kind: "operator" }, team: await this.operatorTeam(caller), caller };
      }
      return credential.kind === "key"
        ? this.authorizeKey(caller, credential.key, requirement)
        : this.authorizeSession(caller, credential.session, address, requirement);
    }
    throw new DomainError(
      "unauthenticated",
      "unauthorized",
      requirement.session
        ? "Authentication required: send an API key as a Bearer token or a dashboard session cookie"
        : "Authentication required: send an API key as a Bearer token",
    );
  }

  /**
   * The credential a caller presents, judged (a failed attempt if it is refused): the operator
   * token, an API key, else its dashboard session.
   */
  private async judge(caller: Caller, address: AttemptAddress): Promise<Credential> {
    // One SHA-256 of the bearer serves both the operator check and the key look-up.
    const bearerHash = caller.bearer === undefined ? undefined : secretHash(caller.bearer);
    if (bearerHash !== undefined && this.operator.matchesDigest(bearerHash)) {
      // The REST API takes API keys (spec 5): there, the operator token is no key, and nothing
      // of the gRPC metadata it would need is named to a REST client.
      if (caller.viaGateway) throw await this.failed(address, ...UNKNOWN_KEY);
      return { kind: "operator" };
    }
    // A key sent other than as a Bearer token is a malformed one (docs/behaviour.md).
    if (caller.unreadableCredential) throw await this.failed(address, ...UNKNOWN_KEY);
    if (caller.bearer !== undefined) {
      const key = await this.lookUpKey(caller.bearer, bearerHash as string, address);
      return { kind: "key", key };
    }
    const now = this.options.clock();
    const session = await this.options.store.sessions.findByHash(
      secretHash(caller.sessionToken as string),
      now,
    );
    if (!session || !sessionLive(session, now)) {
      throw await this.failed(address, ...SESSION_REFUSED);
    }
    return { kind: "session", session };
  }

  /**
   * Authenticates the operator token alone (admin calls). A wrong one is a failed attempt like a
   * wrong key (spec 8), so the token cannot be guessed faster than the failed-authentication
   * limit allows.
   */
  async authorizeOperator(ctx: HandlerContext): Promise<Caller> {
    const caller = await this.refuseWrongGatewayToken(ctx);
    if (caller.bearer === undefined && !caller.unreadableCredential) {
      throw new DomainError("unauthenticated", ...OPERATOR_TOKEN_NEEDED);
    }
    // A blocked address first, whatever it presents (see authorize).
    const address = this.addressOf(caller);
    return this.attempt(address, ctx, async () => {
      if (caller.bearer !== undefined && this.operator.matches(caller.bearer)) return caller;
      throw await this.failed(address, ...OPERATOR_TOKEN_NEEDED);
    });
  }

  private async authorizeKey(
    caller: Caller,
    key: ApiKeyRecord,
    requirement: Requirement,
  ): Promise<Authorized> {
    const missing = key.scopes.includes(requirement.scope) ? [] : [requirement.scope];
    if (missing.length > 0) {
      throw new DomainError(
        "forbidden",
        "missing_scope",
        `This key lacks the required scope: ${missing.join(", ")}`,
      );
    }
    if (requirement.write && key.environment === "test") {
      throw new DomainError(
        "forbidden",
        "test_key_read_only",
        "Test keys are read-only; use a live key to write",
      );
    }
    const team = await this.teamOf(key.teamId);
    if (requirement.crossDevice && !planIncludesCrossDevice(team.plan)) {
      throw new DomainError(
        "forbidden",
        "plan_required",
        `The ${team.plan} plan does not include cross-device consent; it needs professional, business or enterprise`,
      );
    }
    const rateLimit = await this.admit(`key:${key.id}`, planLimit(team.plan));
    const principal: Principal = {
      kind: "key",
      keyId: key.id,
      environment: key.environment,
      scopes: key.scopes,
    };
    return { principal, team, caller, rateLimit };
  }

  /** The key whose SHA-256 is `bearerHash` (secretHash of `bearer`). */
  private async lookUpKey(bearer: string, bearerHash: string, address: AttemptAddress) {
    const now = this.options.clock();
    // decisions §2: a string failing the format or checksum is invalid_key without a look-up.
    const key = parseApiKey(bearer) ? await this.options.store.keys.findByHash(bearerHash) : null;
    // Found through the hash index, so equal: checked again, in constant time (fixed-length hex).
    if (!key || !digestsEqual(key.keyHash, bearerHash)) {
      throw await this.failed(address, ...UNKNOWN_KEY);
    }
    const refusal = keyRefusal(key, now);
    if (refusal) throw await this.failed(address, ...refusal);
    return key;
  }

  private async authorizeSession(
    caller: Caller,
    session: SessionRecord,
    address: AttemptAddress,
    requirement: Requirement,
  ): Promise<Authorized> {
    // decisions §2: a cookie-authenticated write must come from the dashboard's own origin (CSRF).
    if (requirement.write && caller.origin !== this.options.baseOrigin) {
      throw new DomainError(
        "forbidden",
        "origin_not_allowed",
        caller.origin
          ? `A session-authenticated write must come from the dashboard's origin (${this.options.baseOrigin}), not ${caller.origin}`
          : `A session-authenticated write must carry the dashboard's Origin header (${this.options.baseOrigin})`,
      );
    }
    const team = await this.teamOf(session.teamId);
    const rateLimit = await this.admit(`session-ip:${address.bucket}`, SESSION_IP_LIMIT);
    return { principal: { kind: "session", sessionId: session.id }, team, caller, rateLimit };
  }

  private async admit(bucket: string, limit: number): Promise<RateLimitState> {
    const outcome = await this.options.limiter.hit(bucket, limit, KEY_WINDOW_MS);
    if (!outcome.allowed) throw rateLimited(outcome.retryAfterSeconds, { state: outcome.state });
    return outcome.state;
  }

  /**
   * The caller, unless it names a gateway token other than the operator token: that is a failed
   * attempt (spec 8) whatever the call, so the token cannot be guessed through that header faster
   * than through Authorization, and a gateway left with an old token is told so at once instead
   * of having its relayed addresses ignored. Every call that reads its caller passes here.
   */
  async refuseWrongGatewayToken(ctx: HandlerContext): Promise<Caller> {
    const caller = callerOf(ctx, this.options.operatorToken);
    if (!caller.wrongGatewayToken) return caller;
    // The relayed client address goes unread with a wrong token: this is the caller's own.
    const address = this.addressOf(caller);
    await this.refuseBlockedIp(address);
    throw await this.failed(address, ...WRONG_GATEWAY_TOKEN);
  }

  private addressOf(caller: Caller): AttemptAddress {
    return {
      bucket: this.options.ipHasher.hash(caller.clientIp),
      whose: caller.viaGateway ? "relayed client" : "caller",
    };
  }

  /** spec 8: beyond 10 failed attempts a minute, an IP gets 429 whatever it sends. */
  private async refuseBlockedIp(address: AttemptAddress): Promise<number> {
    const { count, resetAtMs } = await this.options.limiter.used(
      `auth-fail:${address.bucket}`,
      MINUTE_MS,
    );
    if (count >= FAILED_AUTH_LIMIT) {
      throw lockedOut(address, retryAfterSeconds(resetAtMs, this.options.clock().getTime()));
    }
    return FAILED_AUTH_LIMIT - count;
  }

  /**
   * Runs the judgement of a credential from `address` unless the address is blocked, and with no
   * more such judgements of the address at once than the failed attempts it has left
   * (AttemptsInFlight): a burst of guesses is judged no faster than the limit counts them. A call
   * that ends (its context's signal: its caller left, its deadline passed) while its judgement
   * waits is judged never.
   */
  private attempt<T>(
    address: AttemptAddress,
    ctx: HandlerContext,
    judgement: () => Promise<T>,
  ): Promise<T> {
    return this.attempts.run(
      address.bucket,
      () => this.refuseBlockedIp(address),
      judgement,
      () => ctx.signal,
    );
  }

  /**
   * Throws when a call admitted earlier may no longer go on: its key revoked or expired since,
   * its session likewise, its team gone. A stream that runs on (a tail, an export) asks while it
   * runs; nothing is counted against a limit. The operator token cannot be withdrawn while the
   * daemon runs.
   */
  async confirmStillAdmitted(auth: Authorized): Promise<void> {
    const now = this.options.clock();
    const { principal } = auth;
    if (principal.kind === "key") {
      // A key gone from the store was removed as no longer to be used: as revoked.
      const key = await this.options.store.keys.get(principal.keyId);
      const refusal = key ? keyRefusal(key, now) : REVOKED_KEY;
      if (refusal) throw new DomainError("unauthenticated", ...refusal);
    }
    if (principal.kind === "session") {
      const session = await this.options.store.sessions.get(principal.sessionId, now);
      if (!session || !sessionLive(session, now)) {
        throw new DomainError("unauthenticated", ...SESSION_REFUSED);
      }
    }
    await this.teamOf(auth.team.id);
  }

  /**
   * Counts a failed attempt, and words it: its 401, or a 429 once the attempt is past the limit.
   * Attempts sent together, more than attempt() lets run at once (from several processes on one
   * store), may pass refuseBlockedIp before any is counted; counted here, one at a time, those
   * past the tenth learn nothing of their credential.
   */
  private async failed(
    address: AttemptAddress,
    code: string,
    message: string,
    extras?: FailureExtras,
  ): Promise<DomainError> {
    const outcome = await this.options.limiter.hit(
      `auth-fail:${address.bucket}`,
      FAILED_AUTH_LIMIT,
      MINUTE_MS,
    );
    if (!outcome.allowed) return lockedOut(address, outcome.retryAfterSeconds);
    return new DomainError("unauthenticated", code, message, extras);
  }

  private async teamOf(teamId: string): Promise<Team> {
    const team = await this.options.store.teams.get(teamId);
    // A credential whose team is gone authenticates nothing.
    if (!team)
      throw new DomainError(
        "unauthenticated",
        "invalid_key",
        "The credential's team no longer exists",
      );
    return team;
  }

  private async operatorTeam(caller: Caller): Promise<Team> {
    if (!caller.team) {
      throw new DomainError(
        "invalid",
        "invalid_request",
        "Operator calls must name a team in consent-team metadata",
      );
    }
    const team = await this.options.store.teams.get(caller.team);
    if (!team) throw new DomainError("not_found", "not_found", `No team with id ${caller.team}`);
    return team;
  }
}
