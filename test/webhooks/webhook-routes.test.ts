import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_WEBHOOKS_PER_TEAM } from "#daemon/webhooks/webhook-rules.js";
import { ErrorInfoSchema } from "#gen/consent/v1/errors_pb.js";
import { WebhookService } from "#gen/consent/v1/webhook_pb.js";
import { createTeam, http, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** decisions §8: /api/v1/webhooks with the envelope, checks and limits of the rest of v1. */
describe("webhook routes", () => {
  let service: TestService;
  let key: string;
  let teamId: string;
  const scopes = ["webhooks:read", "webhooks:write"];
  const body = { url: "https://hooks.example.com/consent", description: "CRM" };
  /** The daemon's clock runs this far ahead: a test moves it to tell writes apart. */
  let offsetMs = 0;

  beforeAll(async () => {
    service = await startTestService({
      gateway: true,
      clock: () => new Date(Date.now() + offsetMs),
    });
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

  it(`refuses a team's webhook beyond ${MAX_WEBHOOKS_PER_TEAM} with 409 failed_precondition, even when creates race`, async () => {
    const team = await createTeam(service);
    const teamKey = (await mintKey(service, team, { scopes })).key;
    const racing = await Promise.all(
      Array.from({ length: MAX_WEBHOOKS_PER_TEAM + 5 }, () =>
        http(service, "POST", "/api/v1/webhooks", { key: teamKey, body }),
      ),
    );
    const statuses = racing.map((result) => result.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(MAX_WEBHOOKS_PER_TEAM);
    expect(statuses.filter((status) => status === 409)).toHaveLength(5);
    const refused = racing.find((result) => result.status === 409);
    expect(refused?.body.data).toMatchObject({ code: "failed_precondition" });
    expect(refused?.body.data.error).toMatch(
      new RegExp(`has ${MAX_WEBHOOKS_PER_TEAM} webhooks, the most it may have; delete one`),
    );
    const listed = await http(service, "GET", "/api/v1/webhooks", { key: teamKey });
    expect(listed.body.data.webhooks).toHaveLength(MAX_WEBHOOKS_PER_TEAM);
    // Another team is not affected; a deletion makes room for one more.
    expect((await http(service, "POST", "/api/v1/webhooks", { key, body })).status).toBe(201);
    const first = listed.body.data.webhooks[0].id;
    await http(service, "DELETE", `/api/v1/webhooks/${first}`, { key: teamKey });
    expect((await http(service, "POST", "/api/v1/webhooks", { key: teamKey, body })).status).toBe(
      201,
    );
    expect((await http(service, "POST", "/api/v1/webhooks", { key: teamKey, body })).status).toBe(
      409,
    );
  });

  it("refuses credentials in the url, on create and on PATCH", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    const id = created.body.data.webhook.id;
    for (const url of [
      "https://user:secret@hooks.example.com/consent",
      "https://user@hooks.example.com/consent",
      "https://:secret@hooks.example.com/consent",
    ]) {
      for (const [method, path] of [
        ["POST", "/api/v1/webhooks"],
        ["PATCH", `/api/v1/webhooks/${id}`],
      ] as const) {
        const result = await http(service, method, path, { key, body: { ...body, url } });
        expect(result.status).toBe(400);
        expect(result.body.data.code).toBe("invalid_request");
        expect(result.body.data.details).toHaveLength(1);
        expect(result.body.data.details[0].field).toBe("url");
        expect(result.body.data.details[0].message).toMatch(
          /^url must not contain a user name or password .*webhook-signature/,
        );
      }
    }
    const got = await http(service, "GET", `/api/v1/webhooks/${id}`, { key });
    expect(got.body.data.webhook.url).toBe(body.url);
    const listed = await http(service, "GET", "/api/v1/webhooks", { key });
    expect(JSON.stringify(listed.body)).not.toContain("secret@");
  });

  // Regression: a url of 2,048 characters or fewer was stored percent-encoded, as the URL parser
  // writes it, up to six times as long (12,020 characters for 2,000 "é"), past the documented limit.
  it("keeps a url within 2,048 characters as stored, non-ASCII characters percent-encoded", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    const id = created.body.data.webhook.id;
    const prefix = "https://hooks.example.com/";
    const widened = `${prefix}${"é".repeat(1_000)}`;
    expect(widened.length).toBeLessThanOrEqual(2_048);
    for (const [method, path] of [
      ["POST", "/api/v1/webhooks"],
      ["PATCH", `/api/v1/webhooks/${id}`],
    ] as const) {
      const result = await http(service, method, path, { key, body: { ...body, url: widened } });
      expect(result.status).toBe(400);
      expect(result.body.data.details).toEqual([
        {
          field: "url",
          message: expect.stringMatching(
            /^url must be at most 2048 characters once written as a URL \(non-ASCII/,
          ),
        },
      ]);
    }
    expect(
      (await http(service, "GET", `/api/v1/webhooks/${id}`, { key })).body.data.webhook.url,
    ).toBe(body.url);
    // At the limit once encoded: accepted, and stored as it was written.
    const longest = `${prefix}${"%C3%A9".repeat(337)}${"a".repeat(2_048 - prefix.length - 6 * 337)}`;
    expect(longest).toHaveLength(2_048);
    const kept = await http(service, "POST", "/api/v1/webhooks", {
      key,
      body: {
        ...body,
        url: `${prefix}${"é".repeat(337)}${"a".repeat(2_048 - prefix.length - 6 * 337)}`,
      },
    });
    expect(kept.status).toBe(201);
    expect(kept.body.data.webhook.url).toBe(longest);
  });

  // Regression: a description holding an escape sequence or a line break was stored, though
  // team, key and banner names refuse them: `consentctl webhooks list` reads it in a terminal.
  it("refuses control characters in the description, over REST and gRPC, on create and update", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    const id = created.body.data.webhook.id;
    const violation = {
      field: "description",
      message: "description must not contain control characters",
    };
    const client = createClient(
      WebhookService,
      createGrpcTransport({ baseUrl: service.daemonUrl }),
    );
    const auth = { headers: { authorization: `Bearer ${key}` } };
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (error: unknown) => {
          const failure = ConnectError.from(error);
          const [info] = failure.findDetails(ErrorInfoSchema);
          return [
            failure.code,
            info?.code,
            info?.details.map(({ field, message }) => ({ field, message })),
          ];
        },
      );
    for (const description of ["CRM\nline two", "CRM\u001b[2J", "CRM\u0085", "\u0000"]) {
      for (const [method, path] of [
        ["POST", "/api/v1/webhooks"],
        ["PATCH", `/api/v1/webhooks/${id}`],
      ] as const) {
        const result = await http(service, method, path, { key, body: { ...body, description } });
        expect([result.status, result.body.data.code, result.body.data.details]).toEqual([
          400,
          "invalid_request",
          [violation],
        ]);
      }
      const refused = [
        await refusal(client.createWebhook({ url: body.url, description }, auth)),
        await refusal(client.updateWebhook({ id, description }, auth)),
      ];
      expect(refused).toEqual([
        [Code.InvalidArgument, "invalid_request", [violation]],
        [Code.InvalidArgument, "invalid_request", [violation]],
      ]);
    }
    const got = await http(service, "GET", `/api/v1/webhooks/${id}`, { key });
    expect(got.body.data.webhook.description).toBe(body.description);
    // Words in any script, with punctuation and symbols, are a description.
    const words = "Équipe CRM — 東京 ✓";
    const kept = await client.updateWebhook({ id, description: words }, auth);
    expect(kept.webhook?.description).toBe(words);
  });

  it("leaves an endpoint, updatedAt included, as it was after a PATCH that changes nothing", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    const { secret: _secret, ...stored } = created.body.data.webhook;
    offsetMs += 60_000;
    const same = { url: stored.url, eventTypes: stored.eventTypes, bannerIds: [] };
    for (const change of [{}, same, { ...stored }, { enabled: true, description: "CRM" }]) {
      const patched = await http(service, "PATCH", `/api/v1/webhooks/${stored.id}`, {
        key,
        body: change,
      });
      expect(patched.status).toBe(200);
      expect(patched.body.data.webhook).toEqual(stored);
    }
    // Not even written: the store's version is the creation's.
    expect((await service.store.webhooks.getEndpoint(teamId, stored.id))?.version).toBe(1);
    const disabled = await http(service, "PATCH", `/api/v1/webhooks/${stored.id}`, {
      key,
      body: { enabled: false },
    });
    expect(disabled.body.data.webhook.updatedAt).not.toBe(stored.updatedAt);
    offsetMs += 60_000;
    const again = await http(service, "PATCH", `/api/v1/webhooks/${stored.id}`, {
      key,
      body: { enabled: false },
    });
    expect(again.body.data.webhook).toEqual(disabled.body.data.webhook);
    const changed = await http(service, "PATCH", `/api/v1/webhooks/${stored.id}`, {
      key,
      body: { description: "changed" },
    });
    expect(changed.body.data.webhook.updatedAt).not.toBe(disabled.body.data.webhook.updatedAt);
  });

  it("stops showing previousSecretExpiresAt once the grace period is over, and drops the old secret at the next write", async () => {
    const created = await http(service, "POST", "/api/v1/webhooks", { key, body });
    const id = created.body.data.webhook.id;
    const rotated = await http(service, "PATCH", `/api/v1/webhooks/${id}`, {
      key,
      body: { rotateSecret: true, secretGracePeriodSeconds: 60 },
    });
    const expiresAt = rotated.body.data.webhook.previousSecretExpiresAt;
    expect(Date.parse(expiresAt) - Date.parse(rotated.body.data.webhook.updatedAt)).toBe(60_000);
    const read = async () => (await http(service, "GET", `/api/v1/webhooks/${id}`, { key })).body;
    expect((await read()).data.webhook.previousSecretExpiresAt).toBe(expiresAt);
    offsetMs += 61_000;
    expect((await read()).data.webhook.previousSecretExpiresAt).toBeNull();
    const listed = await http(service, "GET", "/api/v1/webhooks", { key });
    const shown = listed.body.data.webhooks.find((w: { id: string }) => w.id === id);
    expect(shown.previousSecretExpiresAt).toBeNull();
    // A read writes nothing; the next write drops the expired secret from the record.
    const stored = () => service.store.webhooks.getEndpoint(teamId, id);
    expect(await stored()).toHaveProperty("sealedPreviousSecret");
    const patched = await http(service, "PATCH", `/api/v1/webhooks/${id}`, {
      key,
      body: { description: "after the grace period" },
    });
    expect(patched.body.data.webhook.previousSecretExpiresAt).toBeNull();
    expect(await stored()).not.toHaveProperty("sealedPreviousSecret");
    expect(await stored()).not.toHaveProperty("previousSecretExpiresAt");
    // A rotation without a grace period keeps no previous secret at all.
    const immediate = await http(service, "PATCH", `/api/v1/webhooks/${id}`, {
      key,
      body: { rotateSecret: true, secretGracePeriodSeconds: 0 },
    });
    expect(immediate.body.data.webhook.secret).toMatch(/^whsec_/);
    expect(immediate.body.data.webhook.previousSecretExpiresAt).toBeNull();
    expect(await stored()).not.toHaveProperty("sealedPreviousSecret");
  });

  it("answers other methods with 405 and Allow", async () => {
    const result = await http(service, "PUT", "/api/v1/webhooks", { key });
    expect(result.status).toBe(405);
    expect(result.headers.get("allow")).toBe("GET, POST, HEAD");
    const one = await http(service, "POST", "/api/v1/webhooks/x", { key });
    expect(one.headers.get("allow")).toBe("GET, PATCH, DELETE, HEAD");
  });
});
