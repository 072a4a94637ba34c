import { afterAll, beforeAll } from "vitest";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { createBanner, createTeam, type HttpResult, http, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** A banner's categories with labels: one required, one with a description. */
export const labelledCategories = [
  { name: "necessary", required: true, label: "Necessary" },
  { name: "analytics", label: "Analytics", description: "Usage statistics" },
  { name: "marketing", label: "Marketing" },
];

/** A team, a live key with every scope, and a banner on shop.example.com. */
export async function bannerFixture(
  service: TestService,
  banner: Record<string, unknown> = {},
): Promise<{ teamId: string; key: string; id: string; publicId: string }> {
  const teamId = await createTeam(service);
  const { key } = await mintKey(service, teamId);
  const { id, publicId } = await createBanner(service, key, banner);
  return { teamId, key, id, publicId };
}

/** A valid log payload of decisions §5 for a banner. */
export function aChoice(publicId: string, overrides: Record<string, unknown> = {}) {
  return {
    bannerId: publicId,
    preferences: { necessary: true, analytics: true, marketing: false },
    method: "consent_given",
    timestamp: new Date().toISOString(),
    ...overrides,
  };
}

export interface PostOptions {
  origin?: string | null;
  referer?: string;
  /** Client IP, given through X-Forwarded-For (the service must trust 127.0.0.1). */
  ip?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** POST /api/consent/log as a browser on the banner's site would, unless told otherwise. */
export function postLog(
  service: TestService,
  body: unknown,
  options: PostOptions = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = {
    "content-type": options.contentType ?? "text/plain;charset=UTF-8",
    ...options.headers,
  };
  const origin = options.origin === undefined ? "https://shop.example.com" : options.origin;
  if (origin !== null) headers.origin = origin;
  if (options.referer) headers.referer = options.referer;
  if (options.ip) headers["x-forwarded-for"] = options.ip;
  return http(service, "POST", "/api/consent/log", { body, headers });
}

/** The stored rows of a team, newest first, straight from the store. */
export function storedRows(service: TestService, teamId: string): Promise<ConsentLogRecord[]> {
  return service.store.consentLog.list({ teamId, limit: 5_000 });
}

/**
 * A preferences link (a URL or a path) with one character of its signature changed, one whose
 * bits all count (the last one's do not): a well-formed token whose HMAC matches no secret, which
 * the page refuses as altered.
 */
export function alteredLink(link: string): string {
  return `${link.slice(0, -5)}${link.at(-5) === "A" ? "B" : "A"}${link.slice(-4)}`;
}

/** A fresh client IP per call (only ever a header value), so tests never share a counter. */
export function ipSource(): () => string {
  let next = 0;
  return () => {
    next += 1;
    return `198.51.${Math.floor(next / 250)}.${(next % 250) + 1}`;
  };
}

/**
 * Starts, for the enclosing describe, a service with the gateway, a clock the tests move
 * (`clock.now`), and X-Forwarded-For trusted from 127.0.0.1 so each test can be its own client.
 */
export function useVisitorService(startAt: string, env: Record<string, string> = {}) {
  const context = { clock: { now: Date.parse(startAt) } } as {
    clock: { now: number };
    service: TestService;
  };
  beforeAll(async () => {
    context.service = await startTestService({
      gateway: true,
      clock: () => new Date(context.clock.now),
      env: { CONSENT_TRUST_PROXY: "127.0.0.1", ...env },
    });
  });
  afterAll(() => context.service?.close());
  return context;
}

/** Response headers as a plain object, for one toMatchObject over several of them. */
export function headerRecord(headers: Headers): Record<string, string> {
  const record: Record<string, string> = {};
  headers.forEach((value, name) => {
    record[name] = value;
  });
  return record;
}
