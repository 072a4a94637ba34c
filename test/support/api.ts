import { request as httpRequest } from "node:http";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import type { TestService } from "#test/support/service.js";

export interface HttpResult {
  status: number;
  headers: Headers;
  /** Parsed JSON body (undefined when the body is empty or not JSON). */
  body: any;
  text: string;
}

export interface RequestOptions {
  key?: string;
  /** A JSON-serialisable body, or a string or bytes sent as they are. */
  body?: unknown;
  headers?: Record<string, string>;
}

/** One HTTP request against the gateway, returning status, headers and parsed body. */
export async function http(
  service: TestService,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | Uint8Array<ArrayBuffer> | undefined;
  if (options.body instanceof Uint8Array) {
    body = new Uint8Array(options.body);
    headers["content-type"] ??= "application/json";
  } else if (options.body !== undefined) {
    body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const response = await fetch(`${service.gatewayUrl}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/**
 * One request sent as written, through node:http: any method (fetch refuses TRACE), the path's
 * bytes unchanged (a broken percent-escape, an over-long segment), and the body as sent (fetch
 * would undo a content encoding).
 */
export function rawHttp(
  service: TestService,
  method: string,
  path: string,
  /** An object, or raw name-value pairs (`["Host", "a", "Host", "b"]`: a header given twice). */
  headers: Record<string, string> | string[] = {},
  body?: string,
): Promise<{ status: number; headers: Headers; bytes: Buffer; text: string }> {
  return new Promise((resolve, reject) => {
    const sent = httpRequest(`${service.gatewayUrl}${path}`, { method, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => {
        const bytes = Buffer.concat(chunks);
        resolve({
          status: response.statusCode ?? 0,
          headers: new Headers(response.headers as Record<string, string>),
          bytes,
          text: bytes.toString("utf8"),
        });
      });
    });
    sent.on("error", reject);
    sent.end(body);
  });
}

/** The operator's admin client, authenticated with the service's operator token. */
export function operator(service: TestService): {
  admin: Client<typeof AdminService>;
  auth: { headers: Record<string, string> };
} {
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  return { admin, auth: { headers: { authorization: `Bearer ${service.operatorToken}` } } };
}

export const ALL_SCOPES = [
  "banners:read",
  "banners:write",
  "consent:read",
  "consent:write",
  "logs:read",
  "webhooks:read",
  "webhooks:write",
];

/** Creates a team on a plan. */
export async function createTeam(
  service: TestService,
  plan = "professional",
  name = "Test team",
): Promise<string> {
  const { admin, auth } = operator(service);
  const { team } = await admin.createTeam({ name, plan }, auth);
  return team?.id as string;
}

/** Mints a key for a team and returns the full key. */
export async function mintKey(
  service: TestService,
  teamId: string,
  options: { environment?: "live" | "test"; scopes?: string[]; expiresAt?: Date } = {},
): Promise<{ key: string; id: string }> {
  const { admin, auth } = operator(service);
  const response = await admin.createApiKey(
    {
      teamId,
      environment: options.environment ?? "live",
      scopes: options.scopes ?? ALL_SCOPES,
      name: "test",
      expiresAt: options.expiresAt
        ? { seconds: BigInt(Math.floor(options.expiresAt.getTime() / 1000)), nanos: 0 }
        : undefined,
    },
    auth,
  );
  return { key: response.secret, id: response.apiKey?.id as string };
}

/**
 * A banner's texts in 100 languages (private-use tags qaa-qdv), each a description of 2,000
 * characters: a configuration of about 210 KB, near what one banner body may carry.
 */
export function bulkyTexts(): Record<string, { description: string }> {
  return Object.fromEntries(
    Array.from({ length: 100 }, (_, n) => {
      const tag = `q${String.fromCharCode(97 + Math.floor(n / 26))}${String.fromCharCode(97 + (n % 26))}`;
      return [tag, { description: "x".repeat(2000) }];
    }),
  );
}

/** Creates a banner through the REST API and returns its ids. */
export async function createBanner(
  service: TestService,
  key: string,
  body: Record<string, unknown> = {},
): Promise<{ id: string; publicId: string; banner: any }> {
  const result = await http(service, "POST", "/api/v1/banners", {
    key,
    body: { name: "Shop", domain: "shop.example.com", configuration: {}, ...body },
  });
  if (result.status !== 201)
    throw new Error(`banner creation failed: ${result.status} ${result.text}`);
  const banner = result.body.data.banner;
  return { id: banner.id, publicId: banner.publicId, banner };
}

/**
 * Sets `configuration` on a banner's draft and publishes it through the REST API (PATCH, then
 * publish): what the loader serves next. Throws unless both answer 200.
 */
export async function publishConfiguration(
  service: TestService,
  key: string,
  id: string,
  configuration: Record<string, unknown>,
): Promise<void> {
  const edit = await http(service, "PATCH", `/api/v1/banners/${id}`, {
    key,
    body: { configuration },
  });
  if (edit.status !== 200) throw new Error(`banner edit failed: ${edit.status} ${edit.text}`);
  const published = await http(service, "POST", `/api/v1/banners/${id}/publish`, { key });
  if (published.status !== 200)
    throw new Error(`banner publish failed: ${published.status} ${published.text}`);
}

/** A valid canonical consent state (spec 2.4). */
export function consentState(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schemaVersion: 2,
    categories: ["necessary", "analytics"],
    revision: 1,
    acceptType: "custom",
    consentId: "6f1c2a8e-8d3b-4a53-9d4e-0c1f1b2a3c4d",
    consentTimestamp: "2026-11-20T10:00:00.000Z",
    lastConsentTimestamp: "2026-11-21T10:00:00.000Z",
    languageCode: "en",
    ...overrides,
  };
}
