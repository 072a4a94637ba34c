import type { Client } from "@grpc/grpc-js";
import { credentials, status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import {
  addressOf,
  type BannerObject,
  bearer,
  errorInfoOf,
  fromStruct,
  isoOf,
  loadConsentProtos,
  type Outcome,
  responseOf,
  type SnapshotObject,
  toStruct,
  unary,
} from "#test/support/grpc-js.js";
import { rawRequest } from "#test/support/raw-http2.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * decisions §7: a grpc-js client built only from the .proto files gets the same
 * answers from the daemon as a REST client gets from the gateway.
 */
describe("grpc-js against the daemon", () => {
  let service: TestService;
  let key: string;
  let publicId: string;
  let banners: Client;
  let subjects: Client;
  let health: Client;
  let n = 0;
  const subject = () => ({
    bannerId: publicId,
    subjectId: `grpc-subject-${++n}`,
    namespace: "app",
  });
  const rest = (method: string, path: string, body: unknown, restKey = key) =>
    http(service, method, path, { key: restKey, body });
  const failure = (outcome: Outcome<unknown>) => {
    if (outcome.ok) throw new Error("expected the call to fail");
    return {
      code: outcome.error.code,
      message: outcome.error.details,
      ...errorInfoOf(outcome.error),
    };
  };

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    ({ key } = await mintKey(service, await createTeam(service, "professional")));
    ({ publicId } = await createBanner(service, key, { name: "Made over REST" }));
    const { consent, grpc } = loadConsentProtos();
    const address = addressOf(service.daemonUrl);
    const insecure = credentials.createInsecure();
    banners = new consent.v1.BannerService(address, insecure);
    subjects = new consent.v1.SubjectService(address, insecure);
    health = new grpc.health.v1.Health(address, insecure);
  });
  afterAll(async () => {
    for (const client of [banners, subjects, health]) client?.close();
    await service?.close();
  });

  it("grpc.health.v1.Health/Check answers SERVING for the server and for a consent.v1 service", async () => {
    for (const name of ["", "consent.v1.SubjectService"]) {
      const outcome = await unary(health, "Check", { service: name });
      expect(outcome).toMatchObject({ ok: true, response: { status: "SERVING" } });
    }
  });

  it("Health/Watch reports SERVING, and allows 16 open at once from one address", async () => {
    type Watch = { first: Promise<unknown>; ended: Promise<{ code: number; details: string }> };
    const open = (): Watch & { cancel(): void } => {
      const call = (
        health as unknown as {
          Watch(request: object): NodeJS.EventEmitter & { cancel(): void };
        }
      ).Watch({ service: "" });
      const ended = new Promise<{ code: number; details: string }>((resolve) =>
        call.on("error", (error: { code: number; details: string }) => resolve(error)),
      );
      const first = new Promise((resolve) => call.once("data", resolve));
      return { first, ended, cancel: () => call.cancel() };
    };
    const watches = Array.from({ length: 16 }, open);
    for (const watch of watches) {
      expect(await watch.first).toMatchObject({ status: "SERVING" });
    }
    const refused = await open().ended;
    expect(refused.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(refused.details).toBe(
      "16 Watch calls are open from this address already; end one, or use Check",
    );
    // Check is not bounded by them.
    expect(await unary(health, "Check", { service: "" })).toMatchObject({ ok: true });
    // One ended makes room for another, once the daemon has seen it end.
    watches[0]?.cancel();
    await watches[0]?.ended;
    let again = open();
    for (let tries = 0; tries < 40; tries++) {
      const first = await Promise.race([again.first, again.ended.then(() => undefined)]);
      if (first) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
      again = open();
    }
    expect(await again.first).toMatchObject({ status: "SERVING" });
    for (const watch of [...watches, again]) watch.cancel();
  });

  it("answers many calls at once without a listener-leak warning", async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 30 }, () => unary(health, "Check", { service: "" })),
      );
      expect(outcomes.every((outcome) => outcome.ok)).toBe(true);
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((warning) => warning.includes("MaxListeners"))).toEqual([]);
  });

  it("CreateBanner and ListBanners give the banners REST lists, field for field", async () => {
    const created = await unary<{ banner: BannerObject }>(
      banners,
      "CreateBanner",
      { name: "Made over gRPC", domain: "grpc.example.com", configuration: { layout: "modal" } },
      bearer(key),
    );
    expect(responseOf(created).banner.configuration.layout).toBe("modal");
    const listed = await unary<{ banners: BannerObject[] }>(
      banners,
      "ListBanners",
      {},
      bearer(key),
    );
    const restListed = await rest("GET", "/api/v1/banners", undefined);
    const summary = (b: BannerObject) => ({
      id: b.id,
      publicId: b.publicId,
      name: b.name,
      domain: b.domain,
      isActive: b.isActive,
      revision: b.revision,
      layout: b.configuration.layout,
      compliance: b.compliance,
    });
    const overGrpc = responseOf(listed).banners;
    expect(overGrpc.map(summary)).toEqual(restListed.body.data.banners.map(summary));
    expect(overGrpc.map((b) => b.name)).toEqual(["Made over REST", "Made over gRPC"]);
    expect(overGrpc[1]).toMatchObject({ domain: "https://grpc.example.com", revision: 1 });
    expect(overGrpc.map((b) => isoOf(b.createdAt))).toEqual(
      restListed.body.data.banners.map((b: { createdAt: string }) => b.createdAt),
    );
  });

  it("PutSubjectState and ResolveSubject agree with REST on the snapshot and its version", async () => {
    const who = subject();
    const written = await unary<{ snapshot: SnapshotObject }>(
      subjects,
      "PutSubjectState",
      { ...who, baseVersion: 0, consentState: toStruct(consentState()) },
      bearer(key),
    );
    const { snapshot } = responseOf(written);
    expect(snapshot).toMatchObject({ version: 1, protocolVersion: 1 });
    expect(fromStruct(snapshot.consentState)).toEqual(consentState());

    const overRest = await rest("POST", "/api/v1/consent/subjects/resolve", who);
    expect(overRest.body.data).toEqual({
      found: true,
      consentState: consentState(),
      protocolVersion: 1,
      version: 1,
      clientUpdatedAt: snapshot.clientUpdatedAt,
      updatedAt: isoOf(snapshot.updatedAt),
      expiresAt: isoOf(snapshot.expiresAt),
    });

    const next = consentState({ categories: ["necessary"], acceptType: "necessary" });
    const putOverRest = await rest("PUT", "/api/v1/consent/subjects/state", {
      ...who,
      baseVersion: 1,
      consentState: next,
    });
    const resolved = await unary<{ found: boolean; snapshot: SnapshotObject }>(
      subjects,
      "ResolveSubject",
      who,
      bearer(key),
    );
    const current = responseOf(resolved);
    expect(current).toMatchObject({ found: true, snapshot: { version: 2 } });
    expect(fromStruct(current.snapshot.consentState)).toEqual(next);
    expect(isoOf(current.snapshot.updatedAt)).toBe(putOverRest.body.data.updatedAt);

    const unknown = await unary(subjects, "ResolveSubject", subject(), bearer(key));
    expect(unknown).toMatchObject({ ok: true, response: { found: false, snapshot: null } });
  });

  it("sends the state as JSON text only to a caller that asks for it, sending a REST body or not", async () => {
    type Answer = { snapshot: SnapshotObject & { consentStateJson?: Buffer } };
    const who = subject();
    const state = { ...consentState(), services: { "b-second": ["x"], "a-first": ["y"] } };
    const body = { ...who, baseVersion: 0, consentState: state };
    const asked = await unary<Answer>(
      subjects,
      "PutSubjectState",
      { json: Buffer.from(JSON.stringify(body)), consentStateAsJson: true },
      bearer(key),
    );
    const { snapshot } = responseOf(asked);
    expect(snapshot).toMatchObject({ version: 1, consentState: null });
    expect(snapshot.consentStateJson?.toString()).toBe(JSON.stringify(state));

    // A caller that sends the REST body without asking (one built before the field) reads a Struct.
    for (const request of [{ json: Buffer.from(JSON.stringify(who)) }, who]) {
      const resolved = responseOf(
        await unary<Answer>(subjects, "ResolveSubject", request, bearer(key)),
      ).snapshot;
      expect(fromStruct(resolved.consentState)).toEqual(state);
      expect(resolved.consentStateJson ?? null).toBeNull();
    }
    const typedAsking = responseOf(
      await unary<Answer>(
        subjects,
        "ResolveSubject",
        { ...who, consentStateAsJson: true },
        bearer(key),
      ),
    ).snapshot;
    expect(JSON.parse(String(typedAsking.consentStateJson))).toEqual(state);
  });

  it("DeleteSubjectState counts 1 then 0, as REST does", async () => {
    const who = subject();
    await rest("PUT", "/api/v1/consent/subjects/state", {
      ...who,
      baseVersion: 0,
      consentState: consentState(),
    });
    const first = await unary(subjects, "DeleteSubjectState", who, bearer(key));
    expect(first).toMatchObject({ ok: true, response: { deleted: 1 } });
    const overRest = await rest("DELETE", "/api/v1/consent/subjects/state", who);
    expect(overRest.body.data).toEqual({ success: true, deleted: 0 });
    const again = await unary(subjects, "DeleteSubjectState", who, bearer(key));
    expect(again).toMatchObject({ ok: true, response: { deleted: 0 } });
  });

  it("a stale baseVersion is ABORTED with version_conflict and the current snapshot REST's 409 holds", async () => {
    const who = subject();
    const state = consentState();
    await rest("PUT", "/api/v1/consent/subjects/state", {
      ...who,
      baseVersion: 0,
      consentState: state,
    });
    const stale = { ...who, baseVersion: 0, consentState: toStruct(state) };
    const overGrpc = failure(await unary(subjects, "PutSubjectState", stale, bearer(key)));
    const overRest = await rest("PUT", "/api/v1/consent/subjects/state", {
      ...who,
      baseVersion: 0,
      consentState: state,
    });

    expect(overRest.status).toBe(409);
    expect(overGrpc.code).toBe(status.ABORTED);
    expect(overGrpc.typeUrls).toEqual(["type.googleapis.com/consent.v1.ErrorInfo"]);
    expect(overGrpc.info?.code).toBe(overRest.body.data.code);
    expect(overGrpc.info?.code).toBe("version_conflict");
    const current = overGrpc.info?.current;
    expect(current?.version).toBe(overRest.body.data.current.version);
    expect(current?.consentState).toEqual(overRest.body.data.current.consentState);
    expect(current?.clientUpdatedAt).toBe(overRest.body.data.current.clientUpdatedAt);
  });

  /** A fresh subject's first write, refused to `refusedKey`, made over gRPC and over REST. */
  async function refusedFirstWrite(refusedKey: string) {
    const write = { ...subject(), baseVersion: 0, consentState: consentState() };
    const overGrpc = failure(
      await unary(
        subjects,
        "PutSubjectState",
        { ...write, consentState: toStruct(write.consentState) },
        bearer(refusedKey),
      ),
    );
    const overRest = await rest("PUT", "/api/v1/consent/subjects/state", write, refusedKey);
    return { overGrpc, overRest };
  }

  it("a key without the scope is PERMISSION_DENIED with missing_scope, REST's 403", async () => {
    const { key: readOnly } = await mintKey(service, await createTeam(service, "professional"), {
      scopes: ["consent:read"],
    });
    const { overGrpc, overRest } = await refusedFirstWrite(readOnly);
    expect([overRest.status, overRest.body.data.code]).toEqual([403, "missing_scope"]);
    expect([overGrpc.code, overGrpc.info?.code]).toEqual([
      status.PERMISSION_DENIED,
      "missing_scope",
    ]);
  });

  it("a malformed key is UNAUTHENTICATED with invalid_key, REST's 401", async () => {
    const overGrpc = failure(await unary(banners, "ListBanners", {}, bearer("ck_live_nope")));
    const overRest = await rest("GET", "/api/v1/banners", undefined, "ck_live_nope");
    expect([overRest.status, overRest.body.data.code]).toEqual([401, "invalid_key"]);
    expect([overGrpc.code, overGrpc.info?.code]).toEqual([status.UNAUTHENTICATED, "invalid_key"]);
  });

  it("an error message reads as REST's, punctuation included", async () => {
    // grpc-message is percent-encoded as the gRPC protocol says (only "%", controls and bytes
    // outside ASCII), so grpc-js, which decodes it with decodeURI, reads ";" and "/" as they are.
    const { key: testKey } = await mintKey(service, await createTeam(service, "professional"), {
      environment: "test",
    });
    const { overGrpc, overRest } = await refusedFirstWrite(testKey);
    expect([overRest.status, overRest.body.data.code]).toEqual([403, "test_key_read_only"]);
    expect(overGrpc.message).toBe(overRest.body.data.error);
    expect(overGrpc.message).toContain(";");
  });

  it("a body failing validation is INVALID_ARGUMENT naming the same fields as REST's 400", async () => {
    const bad = { bannerId: publicId, subjectId: "someone@example.com", namespace: "" };
    const overGrpc = failure(await unary(subjects, "ResolveSubject", bad, bearer(key)));
    const overRest = await rest("POST", "/api/v1/consent/subjects/resolve", bad);
    expect(overRest.status).toBe(400);
    expect(overGrpc.code).toBe(status.INVALID_ARGUMENT);
    expect(overGrpc.info?.code).toBe(overRest.body.data.code);
    const fields = overGrpc.info?.details.map((d) => d.field);
    expect(fields).toEqual(overRest.body.data.details.map((d: { field: string }) => d.field));
    expect(fields).toEqual(expect.arrayContaining(["subjectId", "namespace"]));
    expect(overGrpc.message).toBe(overRest.body.data.error);
  });

  it("a banner's texts with a __proto__ entry, sent as Connect JSON, are refused as REST refuses them", async () => {
    // protobuf-es decodes a map entry named __proto__ into the map's prototype: no own key is left,
    // and a read of another language's texts could find the entry's.
    const banner = JSON.stringify({
      name: "Poisoned",
      domain: "poisoned.example.com",
      configuration: { texts: { en: { title: "Own" } } },
    }).replace('"texts":{', '"texts":{"__proto__":{"title":"Inherited"},');
    const overConnect = await rawRequest(
      service.daemonUrl,
      "/consent.v1.BannerService/CreateBanner",
      { "content-type": "application/json", authorization: `Bearer ${key}` },
      Buffer.from(banner),
    );
    const overRest = await http(service, "POST", "/api/v1/banners", { key, body: banner });
    expect([overRest.status, overRest.body.data.error]).toEqual([
      400,
      "Request body contains a forbidden key",
    ]);
    expect([overConnect.status, JSON.parse(overConnect.body.toString())]).toMatchObject([
      400,
      { code: "invalid_argument", message: overRest.body.data.error },
    ]);
  });

  it("a message past the daemon's 1 MiB is RESOURCE_EXHAUSTED with invalid_request, REST's 413", async () => {
    const name = "n".repeat(2 * 1024 * 1024);
    const overGrpc = failure(
      await unary(banners, "CreateBanner", { name, domain: "big.example.com" }, bearer(key)),
    );
    const overRest = await rest("POST", "/api/v1/banners", { name, domain: "big.example.com" });
    expect([overRest.status, overRest.body.data.code]).toEqual([413, "invalid_request"]);
    expect([overGrpc.code, overGrpc.typeUrls, overGrpc.info?.code]).toEqual([
      status.RESOURCE_EXHAUSTED,
      ["type.googleapis.com/consent.v1.ErrorInfo"],
      "invalid_request",
    ]);
  });

  it("an id no record can have (5,000 characters) is NOT_FOUND, as any unknown id", async () => {
    const long = "a".repeat(5_000);
    const owned = failure(await unary(banners, "GetBanner", { id: long }, bearer(key)));
    const published = failure(await unary(banners, "GetPublishedBanner", { publicId: long }));
    expect([owned.code, owned.info?.code]).toEqual([status.NOT_FOUND, "not_found"]);
    expect(published.code).toBe(status.NOT_FOUND);
  });

  it("refuses a request carrying its body in json and in typed fields, naming those fields", async () => {
    const who = subject();
    const both = { ...who, json: Buffer.from(JSON.stringify(subject())) };
    const refused = failure(await unary(subjects, "ResolveSubject", both, bearer(key)));
    expect([refused.code, refused.info?.code]).toEqual([
      status.INVALID_ARGUMENT,
      "invalid_request",
    ]);
    expect(refused.info?.details.map((d) => d.field)).toEqual([
      "bannerId",
      "namespace",
      "subjectId",
    ]);
    // Nothing was written by a refused PUT either.
    const put = { ...who, baseVersion: 0, json: Buffer.from(JSON.stringify(who)) };
    expect(failure(await unary(subjects, "PutSubjectState", put, bearer(key))).code).toBe(
      status.INVALID_ARGUMENT,
    );
    const after = await unary(subjects, "ResolveSubject", who, bearer(key));
    expect(after).toMatchObject({ ok: true, response: { found: false } });
    // A banner update's id is the path's, not the body's: it goes beside json.
    const { id } = await createBanner(service, key, { name: "Renamed over gRPC" });
    const renamed = await unary<{ banner: { name: string } }>(
      banners,
      "UpdateBanner",
      { id, json: Buffer.from(JSON.stringify({ name: "New name" })) },
      bearer(key),
    );
    expect(responseOf(renamed).banner.name).toBe("New name");
    const mixed = { id, name: "Typed", json: Buffer.from(JSON.stringify({ name: "Relayed" })) };
    const refusedUpdate = failure(await unary(banners, "UpdateBanner", mixed, bearer(key)));
    expect([refusedUpdate.code, refusedUpdate.info?.details.map((d) => d.field)]).toEqual([
      status.INVALID_ARGUMENT,
      ["name"],
    ]);
  });

  it("gRPC and REST calls count against the same rate-limit window of a key", async () => {
    const window = 15 * 60_000;
    const left = window - (Date.now() % window);
    if (left < 5_000) await new Promise((resolve) => setTimeout(resolve, left + 100));
    const remaining = async () =>
      Number(
        (await rest("GET", "/api/v1/banners", undefined)).headers.get("x-ratelimit-remaining"),
      );
    const before = await remaining();
    const listed = await unary(banners, "ListBanners", {}, bearer(key));
    expect(listed.ok && listed.metadata.get("x-ratelimit-remaining")).toEqual([String(before - 1)]);
    expect(await remaining()).toBe(before - 2);
  });
});
