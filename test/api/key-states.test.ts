import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTeam, http, mintKey, operator } from "#test/support/api.js";
import { addressOf, bearer, errorInfoOf, loadConsentProtos, unary } from "#test/support/grpc-js.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** spec 5.4 and decisions §2: a key's states as every daemon on one store sees them. */
describe("key states across daemons on one store", () => {
  let dataDir: string;
  let ahead: TestService;
  let behind: TestService;
  const now = Date.parse("2026-11-22T12:07:30.000Z");

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-key-states-"));
    // Two daemons (each with its gateway) on one data directory, one clock 5 s ahead of the other:
    // within what README's Clock section allows between daemons sharing a store.
    ahead = await startTestService({ gateway: true, dataDir, clock: () => new Date(now + 5_000) });
    behind = await startTestService({ gateway: true, dataDir, clock: () => new Date(now) });
  });
  afterAll(async () => {
    await ahead?.close();
    await behind?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it("refuses a key revoked through a daemon whose clock runs ahead, at once, on REST and gRPC", async () => {
    const { key, id } = await mintKey(ahead, await createTeam(ahead, "professional"));
    const { admin, auth } = operator(ahead);
    await admin.revokeApiKey({ id }, auth);

    const rest = await http(behind, "GET", "/api/v1/banners", { key });
    expect([rest.status, rest.body.data.code, rest.headers.get("x-ratelimit-limit")]).toEqual([
      401,
      "revoked_key",
      null,
    ]);
    const banners = new (loadConsentProtos().consent.v1.BannerService)(
      addressOf(behind.daemonUrl),
      grpc.credentials.createInsecure(),
    );
    try {
      const outcome = await unary(banners, "listBanners", {}, bearer(key));
      if (outcome.ok) throw new Error("a revoked key was answered");
      expect([grpc.status[outcome.error.code], errorInfoOf(outcome.error).info?.code]).toEqual([
        "UNAUTHENTICATED",
        "revoked_key",
      ]);
    } finally {
      banners.close();
    }
  });
});
