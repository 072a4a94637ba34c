import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTeam, http, mintKey, operator } from "#test/support/api.js";
import { addressOf, bearer, errorInfoOf, loadConsentProtos, unary } from "#test/support/grpc-js.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * How `service` answers `key` on REST (status, code, whether rate-limit headers came) and on
 * gRPC (status, code): a refusal's, or "ok" for a key that is let through.
 */
async function answersTo(service: TestService, key: string) {
  const rest = await http(service, "GET", "/api/v1/banners", { key });
  const banners = new (loadConsentProtos().consent.v1.BannerService)(
    addressOf(service.daemonUrl),
    grpc.credentials.createInsecure(),
  );
  try {
    const outcome = await unary(banners, "listBanners", {}, bearer(key));
    return {
      rest:
        rest.status === 200
          ? "ok"
          : [rest.status, rest.body.data.code, rest.headers.get("x-ratelimit-limit")],
      grpc: outcome.ok
        ? "ok"
        : [grpc.status[outcome.error.code], errorInfoOf(outcome.error).info?.code],
    };
  } finally {
    banners.close();
  }
}

/** The answers of a key refused with `code` before any rate limiting (spec 5.4, spec 8). */
const refused = (code: string) => ({ rest: [401, code, null], grpc: ["UNAUTHENTICATED", code] });

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

    expect(await answersTo(behind, key)).toEqual(refused("revoked_key"));
  });

  // Regression: the rotating daemon stored its own clock's now as the old key's expiry, which a
  // daemon whose clock is behind kept accepting the key until its clock got there.
  it("refuses a key rotated with no grace period through a daemon whose clock runs ahead, at once, on REST and gRPC", async () => {
    const { key, id } = await mintKey(ahead, await createTeam(ahead, "professional"));
    const { admin, auth } = operator(ahead);
    const rotated = await admin.rotateApiKey({ id, gracePeriodSeconds: 0 }, auth);
    expect(rotated.previous?.expiresAt).toEqual(rotated.apiKey?.createdAt);

    expect(await answersTo(behind, key)).toEqual(refused("expired_key"));
    expect(await answersTo(ahead, key)).toEqual(refused("expired_key"));
    expect(await answersTo(behind, rotated.secret)).toEqual({ rest: "ok", grpc: "ok" });
  });

  it("keeps a rotated key working to the grace period's end as each daemon's clock reads it", async () => {
    const { key, id } = await mintKey(behind, await createTeam(behind, "professional"));
    const { admin, auth } = operator(behind);
    await admin.rotateApiKey({ id, gracePeriodSeconds: 3 }, auth);

    expect(await answersTo(behind, key)).toEqual({ rest: "ok", grpc: "ok" });
    expect(await answersTo(ahead, key)).toEqual(refused("expired_key"));
  });
});
