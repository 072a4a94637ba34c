import { randomUUID } from "node:crypto";
import type { ServiceImpl } from "@connectrpc/connect";
import { apiKeyMessage, sessionMessage, teamMessage } from "#daemon/admin/admin-messages.js";
import {
  KEY_GRACE_SECONDS,
  readKeyCreation,
  readPlan,
  readTeamCreation,
  sessionLifetimeSeconds,
} from "#daemon/admin/admin-rules.js";
import type { Authenticator } from "#daemon/auth/authenticator.js";
import { generateSessionToken } from "#daemon/auth/secrets.js";
import type { Clock } from "#daemon/clock.js";
import { DomainError, invalidRequest, notFound } from "#daemon/errors.js";
import { generateApiKey, keyHint, secretHash } from "#daemon/keys/api-key-format.js";
import { type ApiKeyRecord, keyExpired } from "#daemon/keys/key-store.js";
import type { Store } from "#daemon/store/store.js";
import type { AdminService } from "#gen/consent/v1/admin_pb.js";

export interface AdminServiceOptions {
  store: Store;
  authenticator: Authenticator;
  clock: Clock;
}

/**
 * An id the call names its record by. An empty one is the caller's mistake, said as CreateApiKey
 * says a missing teamId, rather than "No team with id " (a message ending in a space, which HTTP/2
 * cannot carry in grpc-message, so the caller would read an empty one).
 */
function required(field: string, id: string): string {
  if (id === "") throw invalidRequest([{ field, message: `${field} is required` }]);
  return id;
}

/** Operator calls: teams, keys and dashboard sessions (decisions §2). */
export function createAdminService(options: AdminServiceOptions): ServiceImpl<typeof AdminService> {
  const { store, authenticator, clock } = options;

  async function existingTeam(id: string, field: "id" | "teamId") {
    const team = await store.teams.get(required(field, id));
    if (!team) throw notFound(`No team with id ${id}`);
    return team;
  }

  /**
   * Stores a new key created at `createdAt` (now, unless a rotation names its own moment) and
   * returns it with its secret (the only time the secret is seen).
   */
  async function mintKey(
    fields: Omit<ApiKeyRecord, "id" | "keyHash" | "hint" | "createdAt" | "revokedAt">,
    createdAt = clock(),
  ) {
    const secret = generateApiKey(fields.environment);
    const record: ApiKeyRecord = {
      ...fields,
      id: randomUUID(),
      keyHash: secretHash(secret),
      hint: keyHint(secret),
      createdAt,
      revokedAt: null,
    };
    await store.keys.insert(record);
    return { apiKey: apiKeyMessage(record), secret };
  }

  /**
   * A rotation replaces the current key only. A revoked or expired key, or one already replaced
   * (its expiry is now a grace period's end), is refused: the copy would inherit that revocation
   * or expiry, a key that dies with the old one or is born expired.
   */
  function refuseUnrotatable(old: ApiKeyRecord, now: Date): void {
    const refuse = (message: string) => {
      throw new DomainError("failed_precondition", "failed_precondition", message);
    };
    if (old.revokedAt) {
      refuse(
        `API key ${old.id} was revoked at ${old.revokedAt.toISOString()} and cannot be rotated; create a new key instead`,
      );
    }
    if (old.replacedBy) {
      const ends = keyExpired(old, now) ? "stopped" : "stops";
      refuse(
        `API key ${old.id} was already rotated: key ${old.replacedBy} replaced it, and it ${ends} working at ${old.expiresAt?.toISOString()}; rotate ${old.replacedBy} instead`,
      );
    }
    if (old.expiresAt && keyExpired(old, now)) {
      refuse(
        `API key ${old.id} expired at ${old.expiresAt.toISOString()} and cannot be rotated; create a new key instead`,
      );
    }
  }

  /**
   * After a retire of `oldId` toward `newId` that failed: revokes `newId`, the key minted for it,
   * unless the old key is or may yet be marked replaced by it. A store that cannot say whether
   * the write was applied (its `unavailability`: MongoDB's majority that did not answer in time, a reply
   * lost) may have applied it, or may apply it still, and a revoked successor would leave the old
   * key retired toward a key nobody can use, never to be rotated again. The minted key is kept
   * (its secret never leaves this call: a retry that finds the old key replaced by it is told to
   * rotate it instead, docs/behaviour.md), unless the old key, read again, is revoked or replaced
   * by another key, where the retire can never apply. Any other failure applied nothing. Some
   * failures `unavailability` takes applied nothing either (a server that refused for now, such as
   * MongoDB's StaleConfig), but cannot be told apart from those here: they keep the minted key
   * too, the side that never strands the old key.
   */
  async function revokeUnlessMaybeSuccessor(oldId: string, newId: string, failure: unknown) {
    if (store.unavailability(failure)) {
      // The store out of reach for this read too: the outcome stays unknown, and the caller gets
      // the retire's own failure (503 unavailable, spec 7), not this one's.
      const now = await store.keys.get(oldId).catch(() => undefined);
      const mayBeSuccessor =
        now === undefined ||
        (now !== null &&
          (now.replacedBy === newId || (now.replacedBy === undefined && !now.revokedAt)));
      if (mayBeSuccessor) return;
    }
    await store.keys.revoke(newId, clock());
  }

  return {
    async createTeam(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      const input = readTeamCreation(request);
      const now = clock();
      const team = {
        id: randomUUID(),
        name: input.name,
        plan: input.plan,
        createdAt: now,
        updatedAt: now,
      };
      await store.teams.insert(team);
      return { team: teamMessage(team) };
    },

    async listTeams(_request, ctx) {
      await authenticator.authorizeOperator(ctx);
      return { teams: (await store.teams.list()).map(teamMessage) };
    },

    async getTeam(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      return { team: teamMessage(await existingTeam(request.id, "id")) };
    },

    async setTeamPlan(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      const team = await store.teams.setPlan(
        required("id", request.id),
        readPlan(request.plan),
        clock(),
      );
      if (!team) throw notFound(`No team with id ${request.id}`);
      return { team: teamMessage(team) };
    },

    async createApiKey(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      const input = readKeyCreation(request, clock());
      await existingTeam(input.teamId, "teamId");
      return mintKey(input);
    },

    async listApiKeys(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      await existingTeam(request.teamId, "teamId");
      const keys = await store.keys.listByTeam(request.teamId, ctx);
      return { apiKeys: keys.map(apiKeyMessage) };
    },

    async revokeApiKey(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      const key = await store.keys.revoke(required("id", request.id), clock());
      if (!key) throw notFound(`No API key with id ${request.id}`);
      return { apiKey: apiKeyMessage(key) };
    },

    async rotateApiKey(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      if (
        !Number.isInteger(request.gracePeriodSeconds) ||
        request.gracePeriodSeconds < KEY_GRACE_SECONDS.min ||
        request.gracePeriodSeconds > KEY_GRACE_SECONDS.max
      ) {
        throw invalidRequest([
          {
            field: "gracePeriodSeconds",
            message: "gracePeriodSeconds must be from 0 to 7776000 (90 days)",
          },
        ]);
      }
      const old = await store.keys.get(required("id", request.id));
      if (!old) throw notFound(`No API key with id ${request.id}`);
      const at = clock();
      refuseUnrotatable(old, at);
      // Only the current key gets here, so its expiry is the operator's own (or none), not a
      // grace period's end: the replacement keeps it. It is created at the rotation's moment, so
      // with no grace period the old key's expiry is its replacement's createdAt
      // (docs/behaviour.md, "Key rotation").
      const minted = await mintKey(
        {
          teamId: old.teamId,
          environment: old.environment,
          name: old.name,
          scopes: old.scopes,
          expiresAt: old.expiresAt,
        },
        at,
      );
      const newId = minted.apiKey.id;
      // With no grace period the old key is retired on every daemon once this is stored
      // (keyExpired); a longer one ends at an instant, read against each daemon's clock.
      const graceEnd = new Date(at.getTime() + request.gracePeriodSeconds * 1000);
      let previous: ApiKeyRecord | null;
      try {
        previous = await store.keys.retire(old.id, { replacedBy: newId, at, graceEnd });
      } catch (error) {
        // The caller gets the mark's own failure: a revocation failing too leaves the minted key
        // active, as an unknown outcome does, its secret never seen.
        await revokeUnlessMaybeSuccessor(old.id, newId, error).catch(() => undefined);
        throw error;
      }
      if (!previous) {
        // The old key not retired (another rotation or a revocation got there between the read
        // and this write): the key just minted never leaves this call, and is revoked rather
        // than left usable.
        await store.keys.revoke(newId, clock());
        const now = await store.keys.get(old.id);
        refuseUnrotatable(now ?? old, clock());
        throw new DomainError(
          "failed_precondition",
          "failed_precondition",
          `API key ${old.id} cannot be rotated now; read it again`,
        );
      }
      return { ...minted, previous: apiKeyMessage(previous) };
    },

    async createSession(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      await existingTeam(request.teamId, "teamId");
      const lifetime = sessionLifetimeSeconds(request.ttlSeconds);
      const token = generateSessionToken();
      const now = clock();
      const session = {
        id: randomUUID(),
        teamId: request.teamId,
        tokenHash: secretHash(token),
        createdAt: now,
        expiresAt: new Date(now.getTime() + lifetime * 1000),
        revokedAt: null,
      };
      await store.sessions.insert(session);
      return { session: sessionMessage(session), token };
    },

    async listSessions(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      await existingTeam(request.teamId, "teamId");
      const sessions = await store.sessions.listByTeam(request.teamId, clock());
      return { sessions: sessions.map(sessionMessage) };
    },

    async revokeSession(request, ctx) {
      await authenticator.authorizeOperator(ctx);
      const session = await store.sessions.revoke(required("id", request.id), clock());
      if (!session) throw notFound(`No session with id ${request.id}`);
      return { session: sessionMessage(session) };
    },
  };
}
