import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import type { FastifyBaseLogger } from "fastify";
import { CallerHeaders } from "#daemon/auth/caller.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import {
  ErrorInfoSchema,
  LockedOutAddress,
  OperatorTokenRefusal,
} from "#gen/consent/v1/errors_pb.js";

/** A team id no team has: the probe presents no credential, so the daemon looks no team up. */
const PROBE_TEAM_ID = "00000000-0000-0000-0000-000000000000";

/**
 * What the daemon says of a gateway's operator token, judged as it judges the gateway's relayed
 * calls: accepted, refused, the caller's own address locked out for failed attempts, or no
 * verdict: the call's code (unreachable, not a daemon at all). The token goes in
 * consent-gateway-token with no credential, so the daemon's answer to a token it takes is the
 * 401 of a call without the operator token, which is no failed attempt and which no lockout holds
 * back (spec 8): the token is seen accepted while something else on the gateway's host keeps its
 * address locked out, and putting it to the daemon never adds to that lockout. A wrong token is
 * refused, a failed attempt from the caller's address, or answered with that address's lockout:
 * "locked out" is a token the daemon does not take, whose refusal the lockout stands in for
 * (Authenticator.refuseWrongGatewayToken is the only check the probe meets that counts or
 * holds back an address).
 */
export async function operatorTokenVerdict(
  transport: Transport,
  operatorToken: string,
  timeoutMs: number,
): Promise<"accepted" | "refused" | "locked out" | Code> {
  try {
    await createClient(AdminService, transport).getTeam(
      { id: PROBE_TEAM_ID },
      { headers: { [CallerHeaders.gatewayToken]: operatorToken }, timeoutMs },
    );
    // An answer past the operator check would take a credential the probe never sends.
    return Code.Unknown;
  } catch (error) {
    switch (operatorTokenRefusalOf(error)) {
      case OperatorTokenRefusal.WRONG_GATEWAY_TOKEN:
        return "refused";
      // Past the gateway token, to the Bearer token the probe does not send.
      case OperatorTokenRefusal.BEARER_NEEDED:
        return "accepted";
    }
    if (isOwnAddressLockout(error)) return "locked out";
    return ConnectError.from(error).code;
  }
}

/**
 * Which place of the operator token the daemon's `unauthenticated` answer says a call failed, as
 * its ErrorInfo says (daemon/auth/authenticator.ts): its words are for people.
 */
function operatorTokenRefusalOf(error: unknown): OperatorTokenRefusal {
  if (!(error instanceof ConnectError) || error.code !== Code.Unauthenticated) {
    return OperatorTokenRefusal.UNSPECIFIED;
  }
  return (
    error.findDetails(ErrorInfoSchema)[0]?.operatorTokenRefusal ?? OperatorTokenRefusal.UNSPECIFIED
  );
}

/** The daemon refused this gateway's operator token (daemon/auth/authenticator.ts). */
function isGatewayTokenRefusal(error: unknown): boolean {
  return operatorTokenRefusalOf(error) === OperatorTokenRefusal.WRONG_GATEWAY_TOKEN;
}

/**
 * The daemon refuses the gateway's own address for failed authentication attempts (spec 8), as
 * its ErrorInfo says: not the address of a client the gateway relays, whose lockout is that
 * client's 429. A gateway's calls count against its own address only while the daemon does not
 * take its token (daemon/auth/caller.ts), and while the address is locked out, whoever on its
 * host made the failures, they are answered the lockout instead of the token's refusal.
 */
function isOwnAddressLockout(error: unknown): boolean {
  return (
    error instanceof ConnectError &&
    error.code === Code.ResourceExhausted &&
    error.findDetails(ErrorInfoSchema)[0]?.lockedOutAddress === LockedOutAddress.CALLER
  );
}

/** How often a refused token is put to the daemon again, and a quiet gateway's checked. */
const RECHECK_MS = 10_000;
const IDLE_CHECK_MS = 30_000;
const PROBE_TIMEOUT_MS = 2_000;

/**
 * A stand-alone gateway's operator token as its daemon judges it after start-up (which checks it,
 * gateway/main.ts): the daemon's token may change while the gateway runs. Once a call is refused
 * for it, or for the lockout of the gateway's own address (the daemon trusts none of the client
 * addresses it relays, so counts the gateway's; the failures may be another process's on the same
 * host, made before this gateway's first refusal), the gateway is refused until the daemon
 * accepts the token again. Both are the gateway's failure, not the client's. The token is put to
 * the daemon every RECHECK_MS meanwhile (operatorTokenVerdict: accepted again even while the
 * host's address stays locked out), and a gateway that serves no request learns of a refusal
 * from its health checks (at most every IDLE_CHECK_MS).
 */
export class TokenWatch {
  #state: "accepted" | "refused" | "locked out" = "accepted";
  #lastProbe = Number.NEGATIVE_INFINITY;
  #probing = false;
  #recheck: NodeJS.Timeout | undefined;

  constructor(
    private readonly transport: Transport,
    private readonly operatorToken: string,
    private readonly logger: FastifyBaseLogger,
  ) {}

  /** Whether the daemon refuses this gateway: its token, or its own address. */
  get refused(): boolean {
    return this.#state !== "accepted";
  }

  /** Whether `error` is this gateway's failure: the refusal, or the lockout of its own address. */
  isOwnFailure(error: unknown): boolean {
    if (isGatewayTokenRefusal(error)) {
      this.#refuse();
      return true;
    }
    if (!isOwnAddressLockout(error)) return false;
    this.#lockOut();
    return true;
  }

  /** A health check's turn: a probe if none ran lately (in the background). */
  checkIfQuiet(): void {
    if (performance.now() - this.#lastProbe >= IDLE_CHECK_MS) void this.#probe();
  }

  close(): void {
    clearInterval(this.#recheck);
  }

  #refuse(): void {
    if (this.#state === "refused") return;
    this.#shutOut("refused");
    this.logger.error(
      "the daemon refuses this gateway's operator token (its admin token changed after the gateway started): requests are answered 503 until it accepts the token again; restart the gateway with the daemon's current token (CONSENT_ADMIN_TOKEN, or CONSENT_DATA_DIR set to the daemon's data directory)",
    );
  }

  /** The lockout of the gateway's own address, before any refusal of its token: said once. */
  #lockOut(): void {
    if (this.#state !== "accepted") return;
    this.#shutOut("locked out");
    this.logger.warn(
      "the daemon locks this gateway's address out for too many failed authentication attempts (10 a minute): it counts the gateway's calls against the gateway's own address, not its clients', which it does only when it does not take the gateway's operator token (its admin token changed after the gateway started); requests are answered 503 until it accepts the token again. Restart the gateway with the daemon's current token (CONSENT_ADMIN_TOKEN, or CONSENT_DATA_DIR set to the daemon's data directory), and stop what else on this host sends the daemon wrong credentials (another gateway with the old token, a client with wrong keys or tokens): while their failures go on, the address stays locked out",
    );
  }

  #shutOut(state: "refused" | "locked out"): void {
    if (this.#state === "accepted") {
      this.#recheck = setInterval(() => void this.#probe(), RECHECK_MS);
      this.#recheck.unref();
    }
    this.#state = state;
  }

  async #probe(): Promise<void> {
    if (this.#probing) return;
    this.#probing = true;
    this.#lastProbe = performance.now();
    try {
      const verdict = await operatorTokenVerdict(
        this.transport,
        this.operatorToken,
        PROBE_TIMEOUT_MS,
      );
      if (verdict === "refused") this.#refuse();
      else if (verdict === "accepted" && this.#state !== "accepted") {
        this.#state = "accepted";
        clearInterval(this.#recheck);
        this.logger.info("the daemon accepts this gateway's operator token again");
      }
    } finally {
      this.#probing = false;
    }
  }
}

/** Per gateway (its HTTP server): the watch of a stand-alone gateway, none in the daemon's process. */
const watches = new WeakMap<object, TokenWatch>();

export function watchToken(server: object, watch: TokenWatch): void {
  watches.set(server, watch);
}

export function tokenWatchOf(server: object): TokenWatch | undefined {
  return watches.get(server);
}
