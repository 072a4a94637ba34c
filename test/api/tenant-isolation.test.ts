import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  consentState,
  createBanner,
  createTeam,
  http,
  mintKey,
  operator,
} from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** Every route keeps one team's data away from another's credentials. */
describe("tenant isolation", () => {
  let service: TestService;
  let keyA: string;
  let keyB: string;
  let bannerB: { id: string; publicId: string };
  let bannerA: { id: string; publicId: string };

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    keyA = (await mintKey(service, await createTeam(service, "enterprise", "A"))).key;
    keyB = (await mintKey(service, await createTeam(service, "enterprise", "B"))).key;
    bannerA = await createBanner(service, keyA, { name: "A's banner" });
    bannerB = await createBanner(service, keyB, { name: "B's banner" });
    const written = await http(service, "PUT", "/api/v1/consent/subjects/state", {
      key: keyB,
      body: {
        bannerId: bannerB.publicId,
        subjectId: "shared-id",
        baseVersion: 0,
        consentState: consentState(),
      },
    });
    expect(written.status).toBe(200);
  });
  afterAll(() => service.close());

  it("lists only the caller's banners", async () => {
    const list = await http(service, "GET", "/api/v1/banners", { key: keyA });
    expect(list.body.data.banners.map((b: { id: string }) => b.id)).toEqual([bannerA.id]);
  });

  it("answers 404 for another team's banner on get, update and publish, and changes nothing", async () => {
    for (const [method, path, body] of [
      ["GET", `/api/v1/banners/${bannerB.id}`, undefined],
      ["PATCH", `/api/v1/banners/${bannerB.id}`, { name: "hijacked", isActive: false }],
      ["POST", `/api/v1/banners/${bannerB.id}/publish`, undefined],
    ] as const) {
      const result = await http(service, method, path, { key: keyA, body });
      expect([result.status, result.body.data.code]).toEqual([404, "not_found"]);
    }
    const own = await http(service, "GET", `/api/v1/banners/${bannerB.id}`, { key: keyB });
    expect(own.body.data.banner).toMatchObject({ name: "B's banner", isActive: true, revision: 1 });
  });

  it("names a public Banner ID given for a banner's id on the team's own banner only", async () => {
    for (const [method, path] of [
      ["GET", "/api/v1/banners/{id}"],
      ["POST", "/api/v1/banners/{id}/publish"],
    ] as const) {
      const own = await http(service, method, path.replace("{id}", bannerA.publicId), {
        key: keyA,
      });
      expect([own.status, own.body.data.code, own.body.data.error]).toEqual([
        404,
        "not_found",
        `No banner with that id on this team: ${bannerA.publicId} is the public id of banner "A's banner", whose id is ${bannerA.id}`,
      ]);
      // Another team's public id says nothing of that banner.
      const other = await http(service, method, path.replace("{id}", bannerB.publicId), {
        key: keyA,
      });
      expect([other.status, other.body.data.error]).toEqual([
        404,
        "No banner with that id on this team",
      ]);
    }
  });

  // Regression: a banner's id given as the subject endpoints' bannerId got the 404 of an unknown
  // banner, where the banner routes name a public id given for an id.
  it("names a banner's id given for its public Banner ID on the subject routes, for the team's own banner only", async () => {
    const reference = (bannerId: string) => ({ bannerId, subjectId: "named-id" });
    for (const [method, path, body] of [
      ["POST", "/api/v1/consent/subjects/resolve", reference],
      [
        "PUT",
        "/api/v1/consent/subjects/state",
        (bannerId: string) => ({
          ...reference(bannerId),
          baseVersion: 0,
          consentState: consentState(),
        }),
      ],
      ["DELETE", "/api/v1/consent/subjects/state", reference],
    ] as const) {
      const own = await http(service, method, path, { key: keyA, body: body(bannerA.id) });
      expect([own.status, own.body.data.code, own.body.data.error]).toEqual([
        404,
        "not_found",
        `No active banner with that public Banner ID on this team: ${bannerA.id} is a banner's id, whose public Banner ID is ${bannerA.publicId}`,
      ]);
      const other = await http(service, method, path, { key: keyA, body: body(bannerB.id) });
      expect([other.status, other.body.data.error]).toEqual([
        404,
        "No active banner with that public Banner ID on this team",
      ]);
    }
  });

  // Regression: an inactive banner's id was answered with its public Banner ID to use instead,
  // which answers the same 404 (decisions §3: an inactive banner's subject endpoints are 404).
  it("says an inactive banner given by its id on a subject route is inactive, not only which id to send", async () => {
    // A team of its own: the other tests count team A's banners.
    const key = (await mintKey(service, await createTeam(service, "enterprise", "C"))).key;
    const paused = await createBanner(service, key, { name: "Paused banner" });
    const off = await http(service, "PATCH", `/api/v1/banners/${paused.id}`, {
      key,
      body: { isActive: false },
    });
    expect(off.status).toBe(200);
    const reference = (bannerId: string) => ({ bannerId, subjectId: "paused-id" });
    const byId = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: reference(paused.id),
    });
    expect([byId.status, byId.body.data.code, byId.body.data.error]).toEqual([
      404,
      "not_found",
      `No active banner with that public Banner ID on this team: ${paused.id} is a banner's id, whose public Banner ID is ${paused.publicId}, and that banner is inactive: its subject endpoints answer 404 until it is made active again`,
    ]);
    const byPublicId = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: reference(paused.publicId),
    });
    expect([byPublicId.status, byPublicId.body.data.error]).toEqual([
      404,
      "No active banner with that public Banner ID on this team",
    ]);
  });

  it("answers 404 for another team's public Banner ID on every subject route", async () => {
    const reference = { bannerId: bannerB.publicId, subjectId: "shared-id" };
    for (const [method, path, body] of [
      ["POST", "/api/v1/consent/subjects/resolve", reference],
      [
        "PUT",
        "/api/v1/consent/subjects/state",
        { ...reference, baseVersion: 1, consentState: consentState() },
      ],
      ["DELETE", "/api/v1/consent/subjects/state", reference],
    ] as const) {
      const result = await http(service, method, path, { key: keyA, body });
      expect([result.status, result.body.data.code]).toEqual([404, "not_found"]);
    }
    const still = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: keyB,
      body: reference,
    });
    expect(still.body.data).toMatchObject({ found: true, version: 1 });
  });

  it("keeps one subject id apart across banners and namespaces", async () => {
    const resolveA = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: keyA,
      body: { bannerId: bannerA.publicId, subjectId: "shared-id" },
    });
    expect(resolveA.body.data).toEqual({ found: false });
    const otherNamespace = await http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key: keyB,
      body: { bannerId: bannerB.publicId, subjectId: "shared-id", namespace: "crm" },
    });
    expect(otherNamespace.body.data).toEqual({ found: false });
  });

  it("scopes a dashboard session and an operator call to their team", async () => {
    const { admin, auth } = operator(service);
    const teams = (await admin.listTeams({}, auth)).teams;
    const teamA = teams.find((t) => t.name === "A")?.id as string;
    const { token } = await admin.createSession({ teamId: teamA }, auth);
    const bySession = await http(service, "GET", `/api/v1/banners/${bannerB.id}`, {
      headers: { cookie: `consent_session=${token}` },
    });
    expect(bySession.status).toBe(404);
    const listed = await http(service, "GET", "/api/v1/banners", {
      headers: { cookie: `consent_session=${token}` },
    });
    expect(listed.body.data.banners).toHaveLength(1);
  });
});
