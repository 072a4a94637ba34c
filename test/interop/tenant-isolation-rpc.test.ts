import { type Client, Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { ConsentLogService } from "#gen/consent/v1/consent_log_pb.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { ALL_SCOPES, consentState, http, mintKey, operator } from "#test/support/api.js";
import { aChoice, bannerFixture, postLog } from "#test/support/consent-log.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** One team's banner, key, subject state, log row, webhook endpoint and delivery. */
interface Tenant {
  teamId: string;
  key: string;
  id: string;
  publicId: string;
  consentId: string;
  logId: string;
  webhookId: string;
  deliveryId: string;
}

interface Clients {
  banners: Client<typeof BannerService>;
  subjects: Client<typeof SubjectService>;
  logs: Client<typeof ConsentLogService>;
  webhooks: Client<typeof WebhookService>;
}

function clientsOver(transport: Transport): Clients {
  return {
    banners: createClient(BannerService, transport),
    subjects: createClient(SubjectService, transport),
    logs: createClient(ConsentLogService, transport),
    webhooks: createClient(WebhookService, transport),
  };
}

/** The gRPC status and ErrorInfo code a call fails with (undefined codes when it succeeds). */
async function failure(call: Promise<unknown>): Promise<[Code | undefined, string | undefined]> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => ConnectError.from(e),
  );
  return [error?.code, error?.findDetails(ErrorInfoSchema)[0]?.code];
}

async function drained<T>(stream: AsyncIterable<{ entries: T[] }>): Promise<T[]> {
  const entries: T[] = [];
  for await (const batch of stream) entries.push(...batch.entries);
  return entries;
}

/**
 * decisions §2 and §7: the daemon's own port keeps one team's records away from another team's
 * credentials, whatever ids a caller names (path ids, ids in bodies, page tokens) and whatever
 * metadata it adds (consent-team is read for the operator token alone), in every protocol.
 */
describe("tenant isolation on the daemon's port", () => {
  let service: TestService;
  let a: Tenant;
  let b: Tenant;
  let bNewerLogId: string;

  async function tenant(): Promise<Tenant> {
    const fixture = await bannerFixture(service);
    const { key } = await mintKey(service, fixture.teamId, { scopes: ALL_SCOPES });
    const written = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: {
        bannerId: fixture.publicId,
        subjectId: "shared-subject",
        baseVersion: 0,
        consentState: consentState(),
      },
    });
    expect(written.status, written.text).toBe(200);
    const hook = await http(service, "POST", "/api/v1/webhooks", {
      key,
      body: { url: "http://127.0.0.1:9/hook" },
    });
    expect(hook.status, hook.text).toBe(201);
    const posted = await postLog(service, aChoice(fixture.publicId));
    expect(posted.status, posted.text).toBe(200);
    const webhooks = clientsOver(createGrpcTransport({ baseUrl: service.daemonUrl })).webhooks;
    const auth = { headers: { authorization: `Bearer ${key}` } };
    const webhookId = hook.body.data.webhook.id;
    // The event becomes a delivery once the dispatcher has read it.
    const deliveryId = await vi.waitFor(async () => {
      const { deliveries } = await webhooks.listDeliveries({ webhookId }, auth);
      expect(deliveries).toHaveLength(1);
      return deliveries[0]?.id as string;
    });
    const { entries } = await clientsOver(
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    ).logs.listConsentLogs({}, auth);
    return {
      ...fixture,
      key,
      consentId: entries[0]?.consentId as string,
      logId: posted.body.consentLogId,
      webhookId,
      deliveryId,
    };
  }

  beforeAll(async () => {
    service = await startTestService({
      gateway: true,
      env: { CONSENT_WEBHOOK_ALLOW_CIDRS: "127.0.0.1/32" },
    });
    a = await tenant();
    b = await tenant();
    // A row of team B's newer than its first: as a page token it would select that first row,
    // were the team not part of the page's query.
    const newer = await postLog(service, aChoice(b.publicId));
    expect(newer.status, newer.text).toBe(200);
    bNewerLogId = newer.body.consentLogId;
  });
  afterAll(() => service.close());

  const protocols: [string, (baseUrl: string) => Transport][] = [
    ["gRPC", (baseUrl) => createGrpcTransport({ baseUrl })],
    ["gRPC-Web", (baseUrl) => createGrpcWebTransport({ baseUrl, httpVersion: "2" })],
    ["Connect", (baseUrl) => createConnectTransport({ baseUrl, httpVersion: "2" })],
  ];

  it.each(protocols)(
    "a key of team A reaches nothing of team B's over %s, whatever consent-team says",
    async (_name, transport) => {
      const { banners, subjects, logs, webhooks } = clientsOver(transport(service.daemonUrl));
      // consent-team naming team B is no operator's: a key's team is its own.
      const auth = { headers: { authorization: `Bearer ${a.key}`, "consent-team": b.teamId } };
      const reference = { bannerId: b.publicId, subjectId: "shared-subject" };
      const notFound = [Code.NotFound, "not_found"];
      for (const call of [
        () => banners.getBanner({ id: b.id }, auth),
        () => banners.updateBanner({ id: b.id, name: "hijacked" }, auth),
        () => banners.publishBanner({ id: b.id }, auth),
        () => subjects.resolveSubject(reference, auth),
        () => subjects.deleteSubjectState(reference, auth),
        () => webhooks.getWebhook({ id: b.webhookId }, auth),
        () => webhooks.updateWebhook({ id: b.webhookId, url: "https://evil.example/hook" }, auth),
        () => webhooks.testWebhook({ id: b.webhookId }, auth),
        () => webhooks.listDeliveries({ webhookId: b.webhookId }, auth),
        () => webhooks.replayDeliveries({ webhookId: b.webhookId, deliveryId: b.deliveryId }, auth),
        // Team A's own endpoint, team B's delivery.
        () => webhooks.replayDeliveries({ webhookId: a.webhookId, deliveryId: b.deliveryId }, auth),
        () => webhooks.deleteWebhook({ id: b.webhookId }, auth),
      ]) {
        expect(await failure(call())).toEqual(notFound);
      }

      const listed = await banners.listBanners({}, auth);
      expect(listed.banners.map((banner) => banner.id)).toEqual([a.id]);
      expect((await webhooks.listWebhooks({}, auth)).webhooks.map((w) => w.id)).toEqual([
        a.webhookId,
      ]);
      // Team B's banner, consentId or log row named in a filter or a page token selects nothing
      // of team B's.
      for (const query of [
        { bannerId: b.publicId },
        { consentId: b.consentId },
        { pageToken: bNewerLogId },
      ]) {
        const { entries } = await logs.listConsentLogs(query, auth);
        const ownOnly = (ids: string[]) => ids.filter((id) => id !== a.logId);
        expect(ownOnly(entries.map((entry) => entry.consentLogId))).toEqual([]);
        const exported = await drained(logs.exportConsentLogs(query, auth));
        expect(ownOnly(exported.map((entry) => entry.consentLogId))).toEqual([]);
      }
      // Team B's delivery as the page token of team A's own endpoint's deliveries.
      const page = await webhooks.listDeliveries(
        { webhookId: a.webhookId, pageToken: b.deliveryId },
        auth,
      );
      expect(page.deliveries.map((delivery) => delivery.id)).not.toContain(b.deliveryId);
      const stats = await logs.consentLogStats({ bannerId: b.publicId }, auth);
      expect(stats.total).toBe(0n);
    },
  );

  it("leaves team B's records as they were", async () => {
    const { banners, subjects, webhooks } = clientsOver(
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const auth = { headers: { authorization: `Bearer ${b.key}` } };
    const { banner } = await banners.getBanner({ id: b.id }, auth);
    expect([banner?.name, banner?.revision]).toEqual(["Shop", 1]);
    const resolved = await subjects.resolveSubject(
      { bannerId: b.publicId, subjectId: "shared-subject" },
      auth,
    );
    expect([resolved.found, resolved.snapshot?.version]).toEqual([true, 1]);
    const { webhook } = await webhooks.getWebhook({ id: b.webhookId }, auth);
    expect(webhook?.url).toBe("http://127.0.0.1:9/hook");
  });

  it("scopes a dashboard session sent as metadata to its own team, whatever consent-team says", async () => {
    const { admin, auth: operatorAuth } = operator(service);
    const { token } = await admin.createSession({ teamId: a.teamId }, operatorAuth);
    const { banners } = clientsOver(createGrpcTransport({ baseUrl: service.daemonUrl }));
    const auth = { headers: { "consent-session": token, "consent-team": b.teamId } };
    expect((await banners.listBanners({}, auth)).banners.map((banner) => banner.id)).toEqual([
      a.id,
    ]);
    expect(await failure(banners.getBanner({ id: b.id }, auth))).toEqual([
      Code.NotFound,
      "not_found",
    ]);
  });

  it("scopes an operator call to the team its consent-team names, and needs one", async () => {
    const { banners, logs } = clientsOver(createGrpcTransport({ baseUrl: service.daemonUrl }));
    const asOperator = (team?: string) => ({
      headers: {
        authorization: `Bearer ${service.operatorToken}`,
        ...(team !== undefined && { "consent-team": team }),
      },
    });
    expect(await failure(banners.getBanner({ id: b.id }, asOperator(a.teamId)))).toEqual([
      Code.NotFound,
      "not_found",
    ]);
    const listed = await banners.listBanners({}, asOperator(a.teamId));
    expect(listed.banners.map((banner) => banner.id)).toEqual([a.id]);
    const { entries } = await logs.listConsentLogs({ bannerId: b.publicId }, asOperator(a.teamId));
    expect(entries).toEqual([]);
    expect(await failure(banners.listBanners({}, asOperator()))).toEqual([
      Code.InvalidArgument,
      "invalid_request",
    ]);
    expect(await failure(banners.listBanners({}, asOperator(crypto.randomUUID())))).toEqual([
      Code.NotFound,
      "not_found",
    ]);
  });
});
