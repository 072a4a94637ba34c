import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTeam, http, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** decisions §8: /api/v1/webhooks with the envelope, checks and limits of the rest of v1. */
describe("webhook routes", () => {
  let service: TestService;
  let key: string;
  let teamId: string;
  const scopes = ["webhooks:read", "webhooks:write"];
  const body = { url: "https://hooks.example.com/consent", description: "CRM" };

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    teamId = await createTeam(service);
    key = (await mintKey(service, teamId, { scopes })).key;
  });
  afterAll(() => service.close());

  it("creates (201, secret once), lists, reads, updates and deletes an endpoint", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    expect(created.status).toBe(201);
    expect(created.body.version).toBe("v1");
    expect(created.headers.get("x-ratelimit-limit")).not.toBeNull();
    const webhook = created.body.data.webhook;
    expect(webhook).toMatchObject({ ...body, eventTypes: ["consent.given"], enabled: true });
    expect(webhook.secret).toMatch(/^whsec_/);
    // A repeated event type is taken once, as repeated bannerIds are.
    const repeated = await http(service, "POST", "/api/v1/webhooks", {
      key,
      body: { ...body, eventTypes: ["consent.given", "consent.given"] },
    });
    expect([repeated.status, repeated.body.data.webhook.eventTypes]).toEqual([
      201,
      ["consent.given"],
    ]);
    await http(service, "DELETE", `/api/v1/webhooks/${repeated.body.data.webhook.id}`, { key });
    const listed = await http(service, "GET", "/api/v1/webhooks", { key });
    expect(listed.body.data.webhooks.map((w: { id: string }) => w.id)).toContain(webhook.id);
    expect(listed.body.data.webhooks[0].secret).toBeUndefined();
    const patched = await http(service, "PATCH", `/api/v1/webhooks/${webhook.id}`, {
      key,
      body: { enabled: false },
    });
    expect(patched.body.data.webhook).toMatchObject({
      enabled: false,
      disabledReason: "disabled by request",
    });
    const enabled = await http(service, "PATCH", `/api/v1/webhooks/${webhook.id}`, {
      key,
      body: { enabled: true },
    });
    expect(enabled.body.data.webhook).toMatchObject({ enabled: true, disabledReason: null });
    expect((await http(service, "DELETE", `/api/v1/webhooks/${webhook.id}`, { key })).status).toBe(
      200,
    );
    expect((await http(service, "GET", `/api/v1/webhooks/${webhook.id}`, { key })).status).toBe(
      404,
    );
  });

  it("answers 401, 403 missing_scope and 403 test_key_read_only in the order of decisions §2", async () => {
    expect((await http(service, "GET", "/api/v1/webhooks")).body.data.code).toBe("unauthorized");
    const reader = (await mintKey(service, teamId, { scopes: ["banners:read"] })).key;
    const refused = await http(service, "GET", "/api/v1/webhooks", { key: reader });
    expect(refused.status).toBe(403);
    expect(refused.body.data).toMatchObject({ code: "missing_scope" });
    expect(refused.body.data.error).toMatch(/webhooks:read/);
    const test = (await mintKey(service, teamId, { environment: "test", scopes })).key;
    expect((await http(service, "GET", "/api/v1/webhooks", { key: test })).status).toBe(200);
    const write = await http(service, "POST", "/api/v1/webhooks", { key: test, body });
    expect(write.status).toBe(403);
    expect(write.body.data.code).toBe("test_key_read_only");
  });

  it("keeps teams apart", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    const otherKey = (await mintKey(service, await createTeam(service), { scopes })).key;
    const id = created.body.data.webhook.id;
    for (const [method, payload] of [["GET"], ["PATCH", { enabled: false }], ["DELETE"]] as const) {
      const result = await http(service, method, `/api/v1/webhooks/${id}`, {
        key: otherKey,
        body: payload,
      });
      expect(result.status).toBe(404);
      expect(result.body.data.code).toBe("not_found");
    }
    expect(
      (await http(service, "GET", "/api/v1/webhooks", { key: otherKey })).body.data.webhooks,
    ).toEqual([]);
  });

  it("validates bodies: unknown fields, bad event types, another team's banner, bad JSON", async () => {
    const cases: [unknown, string][] = [
      [{ ...body, extra: 1 }, "extra"],
      [{ ...body, eventTypes: ["consent.deleted"] }, "eventTypes[0]"],
      [{ ...body, bannerIds: ["6f1c2a8e-8d3b-4a53-9d4e-0c1f1b2a3c4d"] }, "bannerIds[0]"],
      ["{not json", ""],
    ];
    for (const [payload, field] of cases) {
      const result = await http(service, "POST", "/api/v1/webhooks", { key, body: payload });
      expect(result.status).toBe(400);
      expect(result.body.data.code).toBe("invalid_request");
      expect(result.body.data.details[0].field ?? "").toBe(field);
    }
  });

  it("answers other methods with 405 and Allow", async () => {
    const result = await http(service, "PUT", "/api/v1/webhooks", { key });
    expect(result.status).toBe(405);
    expect(result.headers.get("allow")).toBe("GET, POST, HEAD");
    const one = await http(service, "POST", "/api/v1/webhooks/x", { key });
    expect(one.headers.get("allow")).toBe("GET, PATCH, DELETE, HEAD");
  });
});
