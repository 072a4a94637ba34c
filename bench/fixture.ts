import { readFile } from "node:fs/promises";
import path from "node:path";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ADMIN_TOKEN_FILE } from "#daemon/bootstrap.js";
import { AdminService } from "#gen/consent/v1/admin_pb.js";
import { ALL_SCOPES, consentState } from "#test/support/api.js";
import type { RunningService } from "./service.js";

/** What the scenarios load: one enterprise team, its keys, a banner and stored subject states. */
export interface Fixture {
  /** The operator token of the data directory (consentctl's credential). */
  operatorToken: string;
  teamId: string;
  /** Live keys with every consent and banner scope; requests are spread over them. */
  keys: string[];
  banner: { id: string; publicId: string; domain: string };
  /** Subject ids with a stored state (version 1) in the `default` namespace of the banner. */
  subjectIds: string[];
  /**
   * A banner of a second team that has one webhook endpoint subscribed to `consent.given`, at
   * the benchmark's receiver (set when the run has a receiver); `banner`'s team has none.
   */
  subscribed?: { publicId: string; domain: string; webhookSecret: string };
}

export interface FixtureSize {
  keys: number;
  subjects: number;
}

/** Runs `task` for 0..count-1 with at most `concurrency` in flight; results keep their order. */
async function pool<T>(
  count: number,
  concurrency: number,
  task: (index: number) => Promise<T>,
): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      results[index] = await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return results;
}

/** A JSON request with a key to the gateway, which must answer `status`; returns the body text. */
async function send(
  gatewayUrl: string,
  request: { method: string; path: string; key: string; body: string; status: number },
): Promise<string> {
  const response = await fetch(`${gatewayUrl}${request.path}`, {
    method: request.method,
    headers: { authorization: `Bearer ${request.key}`, "content-type": "application/json" },
    body: request.body,
  });
  const text = await response.text();
  if (response.status !== request.status) {
    throw new Error(`${request.method} ${request.path}: ${response.status} ${text}`);
  }
  return text;
}

/** The body of a first write (baseVersion 0) of `subjectId`'s state. */
export function firstWriteBody(bannerPublicId: string, subjectId: string): string {
  return JSON.stringify({
    bannerId: bannerPublicId,
    namespace: "default",
    subjectId,
    baseVersion: 0,
    consentState: consentState(),
  });
}

/**
 * Mints the fixture through the service's own interfaces: team and keys over gRPC with the
 * operator token from the data directory (as consentctl does), banner and states over REST.
 */
export async function createFixture(
  service: RunningService,
  dataDir: string,
  size: FixtureSize,
  webhookReceiverUrl?: string,
): Promise<Fixture> {
  const operatorToken = (await readFile(path.join(dataDir, ADMIN_TOKEN_FILE), "utf8")).trim();
  const admin = createClient(AdminService, createGrpcTransport({ baseUrl: service.daemonUrl }));
  const auth = { headers: { authorization: `Bearer ${operatorToken}` } };
  const { team, keys } = await mintTeam(admin, auth, "Bench team", size.keys);
  const keyOf = (index: number) => keys[index % keys.length] as string;

  const domain = "shop.example.com";
  const banner = await createBanner(service, keyOf(0), "Bench shop", domain);

  const subjectIds = Array.from({ length: size.subjects }, (_, i) => `bench-subject-${i}`);
  await pool(subjectIds.length, 32, (index) =>
    send(service.gatewayUrl, {
      method: "PUT",
      path: "/api/v1/consent/subjects/state",
      key: keyOf(index),
      body: firstWriteBody(banner.publicId, subjectIds[index] as string),
      status: 200,
    }),
  );
  const subscribed = webhookReceiverUrl
    ? await createSubscribedBanner(service, admin, auth, webhookReceiverUrl)
    : undefined;
  return {
    operatorToken,
    teamId: team.id,
    keys,
    banner: { id: banner.id, publicId: banner.publicId, domain },
    subjectIds,
    subscribed,
  };
}

/** An enterprise team with `keyCount` live keys of every scope, minted over gRPC. */
async function mintTeam(
  admin: Client<typeof AdminService>,
  auth: { headers: Record<string, string> },
  name: string,
  keyCount: number,
) {
  const { team } = await admin.createTeam({ name, plan: "enterprise" }, auth);
  if (!team) throw new Error("createTeam returned no team");
  const keys = await pool(keyCount, 16, async (index) => {
    const minted = await admin.createApiKey(
      { teamId: team.id, environment: "live", scopes: ALL_SCOPES, name: `bench-${index}` },
      auth,
    );
    return minted.secret;
  });
  return { team, keys };
}

/** A banner of the key's team, created over REST. */
async function createBanner(service: RunningService, key: string, name: string, domain: string) {
  const created = await send(service.gatewayUrl, {
    method: "POST",
    path: "/api/v1/banners",
    key,
    body: JSON.stringify({ name, domain, configuration: {} }),
    status: 201,
  });
  return (JSON.parse(created) as { data: { banner: { id: string; publicId: string } } }).data
    .banner;
}

/** A second team with one banner and one endpoint for every `consent.given` at the receiver. */
async function createSubscribedBanner(
  service: RunningService,
  admin: Client<typeof AdminService>,
  auth: { headers: Record<string, string> },
  receiverUrl: string,
): Promise<NonNullable<Fixture["subscribed"]>> {
  const { keys } = await mintTeam(admin, auth, "Bench subscriber", 1);
  const key = keys[0] as string;
  const domain = "subscribed.example.com";
  const { publicId } = await createBanner(service, key, "Bench subscribed shop", domain);
  const webhook = await send(service.gatewayUrl, {
    method: "POST",
    path: "/api/v1/webhooks",
    key,
    body: JSON.stringify({ url: `${receiverUrl}/hooks`, eventTypes: ["consent.given"] }),
    status: 201,
  });
  const { secret } = (JSON.parse(webhook) as { data: { webhook: { secret: string } } }).data
    .webhook;
  return { publicId, domain, webhookSecret: secret };
}
