import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { planIncludesCrossDevice } from "#daemon/auth/scopes.js";
import type { ApiKeyRecord } from "#daemon/keys/key-store.js";
import { planLimit } from "#daemon/limits/rate-limiter.js";
import type { SessionRecord } from "#daemon/sessions/session-store.js";
import type { Team as TeamRecord } from "#daemon/teams/team-store.js";
import {
  type ApiKey,
  ApiKeySchema,
  type Session,
  SessionSchema,
  type Team,
  TeamSchema,
} from "#gen/consent/v1/admin_pb.js";

const timestamp = (date: Date | null | undefined) => (date ? timestampFromDate(date) : undefined);

export function teamMessage(team: TeamRecord): Team {
  return create(TeamSchema, {
    id: team.id,
    name: team.name,
    plan: team.plan,
    crossDeviceConsent: planIncludesCrossDevice(team.plan),
    rateLimit: planLimit(team.plan),
    createdAt: timestampFromDate(team.createdAt),
    updatedAt: timestampFromDate(team.updatedAt),
  });
}

export function apiKeyMessage(key: ApiKeyRecord): ApiKey {
  return create(ApiKeySchema, {
    id: key.id,
    teamId: key.teamId,
    environment: key.environment,
    name: key.name,
    scopes: key.scopes,
    hint: key.hint,
    createdAt: timestampFromDate(key.createdAt),
    expiresAt: timestamp(key.expiresAt),
    revokedAt: timestamp(key.revokedAt),
    replacedBy: key.replacedBy,
    replacedAt: timestamp(key.replacedAt),
  });
}

export function sessionMessage(session: SessionRecord): Session {
  return create(SessionSchema, {
    id: session.id,
    teamId: session.teamId,
    createdAt: timestampFromDate(session.createdAt),
    expiresAt: timestampFromDate(session.expiresAt),
    revokedAt: timestamp(session.revokedAt),
  });
}
