import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import { startTestService, type TestService } from "#test/support/service.js";

const DAY = 86_400_000;

/** Spec 3.2 and decisions §4 through REST: versions, expiry, deletion, races, identity keys. */
describe("consent subject records", () => {
  let service: TestService;
  let now = Date.parse("2026-11-22T12:00:00.000Z");
  let key: string;
  let bannerId: string;
  let publicId: string;
  let n = 0;
  const fresh = () => ({ bannerId: publicId, subjectId: `subject-${++n}` });
  const put = (body: Record<string, unknown>) =>
    http(service, "PUT", "/api/v1/consent/subjects/state", { key, body });
  const resolve = (body: Record<string, unknown>) =>
    http(service, "POST", "/api/v1/consent/subjects/resolve", { key, body });
  const remove = (body: Record<string, unknown>) =>
    http(service, "DELETE", "/api/v1/consent/subjects/state", { key, body });

  beforeAll(async () => {
    service = await startTestService({ gateway: true, clock: () => new Date(now) });
    key = (await mintKey(service, await createTeam(service, "business"))).key;
    ({ id: bannerId, publicId } = await createBanner(service, key));
  });
  afterAll(() => service.close());

  it("resolves a subject without a record as exactly { found: false }", async () => {
    const result = await resolve(fresh());
    expect(result.body).toEqual({ data: { found: false }, version: "v1" });
  });

  it("writes version 1, then +1 per write, and resolves the latest snapshot", async () => {
    const subject = fresh();
    const first = await put({ ...subject, baseVersion: 0, consentState: consentState() });
    expect(first.status).toBe(200);
    expect(Object.keys(first.body.data).sort()).toEqual([
      "clientUpdatedAt",
      "consentState",
      "expiresAt",
      "protocolVersion",
      "success",
      "updatedAt",
      "version",
    ]);
    expect(first.body.data).toMatchObject({
      success: true,
      version: 1,
      protocolVersion: 1,
      clientUpdatedAt: "2026-11-21T10:00:00.000Z",
    });
    const state = consentState({
      categories: ["necessary"],
      acceptType: "necessary",
      lastConsentTimestamp: "2026-11-22T11:00:00+01:00",
    });
    const second = await put({
      ...subject,
      baseVersion: 1,
      consentState: state,
      protocolVersion: 1,
    });
    expect(second.body.data).toMatchObject({
      version: 2,
      consentState: state,
      clientUpdatedAt: "2026-11-22T11:00:00+01:00",
    });
    const resolved = await resolve(subject);
    expect(resolved.body.data).toEqual({ found: true, ...second.body.data, success: undefined });
  });

  it("answers with the stored state in the envelope's compact JSON, escapes and all", async () => {
    const subject = fresh();
    // Service names out of alphabetical order, unicode and escapes: the answer keeps them.
    const state = {
      ...consentState(),
      services: { "zeta-pixel": ["pixel"], "ä-analytics": ['quote"d', "back\\slash \u2028 ✓"] },
    };
    const written = await put({ ...subject, baseVersion: 0, consentState: state });
    const resolved = await resolve(subject);
    for (const [answer, lead] of [
      [written, { success: true }],
      [resolved, { found: true }],
    ] as const) {
      expect(answer.status).toBe(200);
      expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
      const { data } = answer.body;
      expect(answer.text).toBe(
        JSON.stringify({
          data: {
            ...lead,
            consentState: state,
            protocolVersion: 1,
            version: 1,
            clientUpdatedAt: data.clientUpdatedAt,
            updatedAt: data.updatedAt,
            expiresAt: data.expiresAt,
          },
          version: "v1",
        }),
      );
    }
  });

  it('treats an omitted namespace as "default" and keeps other namespaces apart', async () => {
    const subject = fresh();
    await put({ ...subject, baseVersion: 0, consentState: consentState() });
    expect((await resolve({ ...subject, namespace: "default" })).body.data.found).toBe(true);
    expect((await resolve({ ...subject, namespace: "app" })).body.data.found).toBe(false);
  });

  it("compares a subject id and a namespace as sent: no Unicode normalisation, case folding or trimming (spec 2.2: opaque)", async () => {
    const nfc = "caf\u00e9-42";
    await put({
      bannerId: publicId,
      subjectId: nfc,
      namespace: "caf\u00e9",
      baseVersion: 0,
      consentState: consentState(),
    });
    const found = async (subjectId: string, namespace = "caf\u00e9") =>
      (await resolve({ bannerId: publicId, subjectId, namespace })).body.data.found;
    expect(await found(nfc)).toBe(true);
    // The same text in NFD, another case, with white space: each is another subject.
    for (const other of ["cafe\u0301-42", "CAF\u00c9-42", ` ${nfc}`, `${nfc} `, `${nfc}\u00a0`]) {
      expect([other, await found(other)]).toEqual([other, false]);
    }
    expect(await found(nfc, "cafe\u0301")).toBe(false);
  });

  it("refuses a body that is not UTF-8 as invalid JSON, so no two byte strings name one subject (RFC 8259 §8.1)", async () => {
    /** The body of a PUT as bytes, with `subjectId` ending in `tail`. */
    const bytesOf = (subjectId: string, tail: number[]) =>
      Buffer.concat([
        Buffer.from(`{"bannerId":"${publicId}","subjectId":"${subjectId}`),
        Buffer.from(tail),
        Buffer.from(`","baseVersion":0,"consentState":${JSON.stringify(consentState())}}`),
      ]);
    const send = (method: string, path: string, body: Buffer) =>
      http(service, method, path, { key, body });
    const notJson = {
      data: {
        error: "Request body is not valid JSON",
        code: "invalid_request",
        details: [{ message: "The request body is not valid JSON" }],
      },
      version: "v1",
    };
    for (const [method, path] of [
      ["PUT", "/api/v1/consent/subjects/state"],
      ["POST", "/api/v1/consent/subjects/resolve"],
      ["DELETE", "/api/v1/consent/subjects/state"],
    ]) {
      for (const tail of [[0xff], [0xfe], [0xc3], [0xed, 0xa0, 0x80]]) {
        const result = await send(method as string, path as string, bytesOf("utf8-", tail));
        expect([method, tail, result.status, result.body]).toEqual([method, tail, 400, notJson]);
      }
    }
    // Nothing was stored under U+FFFD, what a lossy decoder would have made of each byte.
    expect((await resolve({ bannerId: publicId, subjectId: "utf8-\uFFFD" })).body.data).toEqual({
      found: false,
    });
    // A UTF-8 byte order mark is valid UTF-8 and still read past; real UTF-8 is kept as sent.
    const bom = [0xef, 0xbb, 0xbf];
    const written = await send(
      "PUT",
      "/api/v1/consent/subjects/state",
      Buffer.concat([Buffer.from(bom), bytesOf("utf8-", [0xc3, 0xbf])]),
    );
    expect([written.status, written.body.data.version]).toEqual([200, 1]);
    expect((await resolve({ bannerId: publicId, subjectId: "utf8-\u00ff" })).body.data.found).toBe(
      true,
    );
  });

  it("answers 404 for a baseVersion above 0 without a record, and deletes nothing as 0", async () => {
    const subject = fresh();
    const missing = await put({ ...subject, baseVersion: 4, consentState: consentState() });
    expect([missing.status, missing.body.data.code]).toEqual([404, "not_found"]);
    expect((await remove(subject)).body.data).toEqual({ success: true, deleted: 0 });
    await put({ ...subject, baseVersion: 0, consentState: consentState() });
    expect((await remove(subject)).body.data).toEqual({ success: true, deleted: 1 });
    expect((await resolve(subject)).body.data).toEqual({ found: false });
  });

  it("lets exactly one of 20 concurrent writers with one baseVersion win; the rest get 409 with current", async () => {
    for (const base of [0, 1]) {
      const subject = base === 0 ? fresh() : { bannerId: publicId, subjectId: `subject-${n}` };
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          put({ ...subject, baseVersion: base, consentState: consentState({ revision: i }) }),
        ),
      );
      const winners = results.filter((r) => r.status === 200);
      const losers = results.filter((r) => r.status === 409);
      expect([winners.length, losers.length]).toEqual([1, 19]);
      for (const loser of losers)
        expect(loser.body.data.current).toEqual(omitSuccess(winners[0]?.body.data));
    }
  });

  it("expires records 13 months after the write by default and caps an explicit expiry at 25 months", async () => {
    const byDefault = await put({ ...fresh(), baseVersion: 0, consentState: consentState() });
    expect(byDefault.body.data.expiresAt).toBe("2027-12-22T12:00:00.000Z");
    const capped = await put({
      ...fresh(),
      baseVersion: 0,
      consentState: consentState(),
      expiresAt: "2040-01-01T00:00:00Z",
    });
    expect(capped.body.data.expiresAt).toBe("2028-12-22T12:00:00.000Z");
    const explicit = await put({
      ...fresh(),
      baseVersion: 0,
      consentState: consentState(),
      expiresAt: "2027-01-01T00:00:00Z",
    });
    expect(explicit.body.data.expiresAt).toBe("2027-01-01T00:00:00.000Z");
    const past = await put({
      ...fresh(),
      baseVersion: 0,
      consentState: consentState(),
      expiresAt: "2026-01-01T00:00:00Z",
    });
    expect([past.status, past.body.data.details[0].field]).toEqual([400, "expiresAt"]);
    // Named beside the body's other failures, in one answer.
    const both = await put({
      ...fresh(),
      baseVersion: -1,
      consentState: consentState(),
      expiresAt: "2026-01-01T00:00:00Z",
    });
    expect(both.status).toBe(400);
    expect(both.body.data.details.map((d: { field: string }) => d.field)).toEqual([
      "baseVersion",
      "expiresAt",
    ]);
  });

  it("treats an expired record as absent: resolve, write, delete", async () => {
    const subject = fresh();
    await put({
      ...subject,
      baseVersion: 0,
      consentState: consentState(),
      expiresAt: new Date(now + DAY).toISOString(),
    });
    now += 2 * DAY;
    expect((await resolve(subject)).body.data).toEqual({ found: false });
    expect((await put({ ...subject, baseVersion: 1, consentState: consentState() })).status).toBe(
      404,
    );
    expect((await remove(subject)).body.data.deleted).toBe(0);
    const again = await put({ ...subject, baseVersion: 0, consentState: consentState() });
    expect([again.status, again.body.data.version]).toEqual([200, 1]);
  });

  it("answers 404 on every subject route once the banner is deactivated", async () => {
    const other = await createBanner(service, key, { name: "Soon inactive" });
    const subject = { bannerId: other.publicId, subjectId: "s" };
    await put({ ...subject, baseVersion: 0, consentState: consentState() });
    await http(service, "PATCH", `/api/v1/banners/${other.id}`, { key, body: { isActive: false } });
    for (const result of [
      await resolve(subject),
      await put({ ...subject, baseVersion: 1, consentState: consentState() }),
      await remove(subject),
    ]) {
      expect([result.status, result.body.data.code]).toEqual([404, "not_found"]);
    }
    expect(bannerId).toBeTruthy();
  });

  it.each([
    ["subjectId", { subjectId: "someone@example.com" }],
    ["subjectId", { subjectId: "x".repeat(257) }],
    ["namespace", { namespace: "n".repeat(65) }],
    ["namespace", { namespace: "" }],
    [
      "consentState.categories",
      { consentState: consentState({ categories: Array.from({ length: 51 }, (_, i) => `c${i}`) }) },
    ],
    [
      "consentState.categories[0]",
      { consentState: consentState({ categories: ["c".repeat(101)] }) },
    ],
    [
      "consentState.categories",
      { consentState: consentState({ categories: ["necessary", "necessary"] }) },
    ],
    ["consentState.jurisdictions", { consentState: consentState({ jurisdictions: ["eu", "eu"] }) }],
    ["consentState.revision", { consentState: consentState({ revision: 1_000_001 }) }],
    ["consentState.languageCode", { consentState: consentState({ languageCode: "l".repeat(21) }) }],
    ["consentState.acceptType", { consentState: consentState({ acceptType: "some" }) }],
    ["consentState.consentId", { consentState: consentState({ consentId: "123" }) }],
    [
      "consentState.consentTimestamp",
      { consentState: consentState({ consentTimestamp: "yesterday" }) },
    ],
    [
      "consentState.lastConsentTimestamp",
      { consentState: consentState({ lastConsentTimestamp: "2026-11-19T10:00:00Z" }) },
    ],
    ["consentState.collectedVia", { consentState: consentState({ collectedVia: "fax" }) }],
    [
      "consentState.usOptOutChoices.sharing",
      { consentState: consentState({ usOptOutChoices: { sharing: true } }) },
    ],
    ["protocolVersion", { protocolVersion: 2 }],
    ["baseVersion", { baseVersion: 1.5 }],
    ["consentState", { consentState: undefined }],
  ])("400 invalid_request names %s", async (field, override) => {
    const result = await put({
      ...fresh(),
      baseVersion: 0,
      consentState: consentState(),
      ...override,
    });
    expect(result.status).toBe(400);
    expect(result.body.data.code).toBe("invalid_request");
    expect(result.body.data.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  /** The 400 invalid_request details of a PUT whose body is a valid write with `override` applied. */
  const detailsOf = async (override: Record<string, unknown>) => {
    const result = await put({
      ...fresh(),
      baseVersion: 0,
      consentState: consentState(),
      ...override,
    });
    expect([result.status, result.body.data.code]).toEqual([400, "invalid_request"]);
    return result.body.data.details;
  };
  const violation = (field: string, rule: string) => ({ field, message: `${field} ${rule}` });
  const precedes = violation(
    "consentState.lastConsentTimestamp",
    "must not precede consentState.consentTimestamp",
  );
  const notIso = (field: string) =>
    violation(field, "must be an ISO 8601 date-time with a time zone, e.g. 2026-01-31T12:00:00Z");

  it("lists timestamps out of order beside every other violated field", async () => {
    const early = { lastConsentTimestamp: "2026-11-19T10:00:00Z" };
    expect(await detailsOf({ consentState: consentState({ ...early, schemaVersion: 1 }) })).toEqual(
      [violation("consentState.schemaVersion", "must be 2"), precedes],
    );
    expect(await detailsOf({ consentState: consentState({ ...early, languageCode: "" }) })).toEqual(
      [violation("consentState.languageCode", "must be 1-20 characters"), precedes],
    );
    expect(await detailsOf({ consentState: consentState({ ...early, extra: true }) })).toEqual([
      violation("consentState.extra", "is not a known field"),
      precedes,
    ]);
    expect(
      await detailsOf({
        subjectId: "",
        consentState: consentState({ ...early, categories: [""] }),
      }),
    ).toEqual([
      violation("subjectId", "must be 1-256 characters"),
      violation("consentState.categories[0]", "must be 1-100 characters"),
      precedes,
    ]);
  });

  it("compares the two timestamps with every fractional digit, across offsets (spec 2.4)", async () => {
    for (const [consentTimestamp, lastConsentTimestamp] of [
      ["2026-11-22T08:00:00.0001Z", "2026-11-22T08:00:00Z"],
      ["2026-11-22T08:00:00.000000002Z", "2026-11-22T08:00:00.000000001Z"],
      ["2026-11-22T09:00:00.0000001+01:00", "2026-11-22T08:00:00.000Z"],
      ["2026-11-22T08:00:00.1234567Z", "2026-11-22T03:30:00.123456-04:30"],
    ]) {
      expect(
        await detailsOf({ consentState: consentState({ consentTimestamp, lastConsentTimestamp }) }),
      ).toEqual([precedes]);
    }
    for (const [consentTimestamp, lastConsentTimestamp] of [
      ["2026-11-22T08:00:00.0001Z", "2026-11-22T08:00:00.000100000Z"],
      ["2026-11-22T09:00:00.0001+01:00", "2026-11-22T08:00:00.00010001Z"],
    ]) {
      const written = await put({
        ...fresh(),
        baseVersion: 0,
        consentState: consentState({ consentTimestamp, lastConsentTimestamp }),
      });
      expect([written.status, written.body.data.consentState.consentTimestamp]).toEqual([
        200,
        consentTimestamp,
      ]);
    }
  });

  it("names an invalid timestamp as such and never compares it with the other one", async () => {
    for (const invalid of [
      "yesterday",
      "2026-13-45T08:00:00Z",
      "2026-02-30T08:00:00Z",
      "2026-01-31T24:00:00Z",
      "2026-01-31T08:60:00Z",
      "2026-01-31T08:00:00+24:00",
    ]) {
      expect(
        await detailsOf({ consentState: consentState({ lastConsentTimestamp: invalid }) }),
      ).toEqual([notIso("consentState.lastConsentTimestamp")]);
      expect(
        await detailsOf({ consentState: consentState({ consentTimestamp: invalid }) }),
      ).toEqual([notIso("consentState.consentTimestamp")]);
    }
    expect(await detailsOf({ expiresAt: "2027-04-31T00:00:00Z" })).toEqual([notIso("expiresAt")]);
    expect(
      (
        await put({
          ...fresh(),
          baseVersion: 0,
          consentState: consentState(),
          expiresAt: "2028-02-29T00:00:00Z",
        })
      ).status,
    ).toBe(200);
  });

  it("names a map that is not a JSON object as such", async () => {
    expect(await detailsOf({ consentState: consentState({ services: null }) })).toEqual([
      violation("consentState.services", "must be an object"),
    ]);
  });

  it("refuses control characters in the state's names and codes, as a log post does (a NUL no database field name can hold)", async () => {
    const control = "must not contain control characters";
    expect(
      await detailsOf({
        consentState: consentState({
          categories: ["necessary", "a\u0000b"],
          languageCode: "en\u001b[31m",
          services: { "a\u0000b": ["x"], analytics: ["ga\u0007"] },
          jurisdictions: ["eu\n"],
        }),
      }),
    ).toEqual([
      violation("consentState.categories[1]", control),
      violation("consentState.languageCode", control),
      violation("consentState.services", `keys ${control}`),
      violation("consentState.services.analytics[0]", control),
      violation("consentState.jurisdictions[0]", control),
    ]);
  });

  it("names a list over its bound for its length alone, its entries once it is within it", async () => {
    const categories = [...Array.from({ length: 49 }, (_, i) => `c${i}`), "c0", "x".repeat(101)];
    expect(await detailsOf({ consentState: consentState({ categories }) })).toEqual([
      violation("consentState.categories", "must have at most 50 entries"),
    ]);
    expect(
      await detailsOf({
        consentState: consentState({ categories: categories.filter((name) => name !== "c1") }),
      }),
    ).toEqual([
      violation("consentState.categories[49]", "must be 1-100 characters"),
      violation("consentState.categories", "must not repeat a category: c0"),
    ]);
  });

  it("names a rule broken by several of a map's keys once", async () => {
    expect(
      await detailsOf({
        consentState: consentState({
          services: { "": ["a"], ["k".repeat(101)]: ["b"], ok: ["c"] },
        }),
      }),
    ).toEqual([violation("consentState.services", "keys must be 1-100 characters")]);
  });

  it("refuses text with an unpaired surrogate, which no store keeps as written", async () => {
    const invalid = "must be valid Unicode (it holds an unpaired surrogate)";
    expect(
      await detailsOf({
        consentState: consentState({ languageCode: "en\ud800", services: { "\udc00x": ["ok"] } }),
      }),
    ).toEqual([
      violation("consentState.languageCode", invalid),
      violation("consentState.services", `keys ${invalid}`),
    ]);
    // A pair is one character, however it is escaped.
    const paired = await put({
      ...fresh(),
      baseVersion: 0,
      consentState: consentState({ languageCode: "en-\ud83d\ude00" }),
    });
    expect(paired.status).toBe(200);
    expect(paired.body.data.consentState.languageCode).toBe("en-😀");
  });

  it("says a missing field is required and a present one what it must be", async () => {
    const required = (field: string) => violation(field, "is required");
    expect((await put({})).body.data.details).toEqual(
      ["bannerId", "subjectId", "baseVersion", "consentState"].map(required),
    );
    expect(await detailsOf({ consentState: {} })).toEqual(
      [
        "schemaVersion",
        "categories",
        "revision",
        "acceptType",
        "consentId",
        "consentTimestamp",
        "lastConsentTimestamp",
        "languageCode",
      ].map((field) => required(`consentState.${field}`)),
    );
    expect(
      await detailsOf({
        protocolVersion: 2,
        consentState: consentState({ schemaVersion: null, acceptType: "some" }),
      }),
    ).toEqual([
      violation("consentState.schemaVersion", "must be 2"),
      violation("consentState.acceptType", 'must be one of: "all", "custom", "necessary"'),
      violation("protocolVersion", "must be 1"),
    ]);
  });

  it("refuses null for an optional field as a wrong type, never reading it as absent", async () => {
    expect(await detailsOf({ namespace: null, expiresAt: null, protocolVersion: null })).toEqual([
      violation("namespace", "must be a string"),
      violation("expiresAt", "must be a string"),
      violation("protocolVersion", "must be 1"),
    ]);
  });
});

describe("identity key rotation (decisions §4)", () => {
  const k1 = randomBytes(32).toString("base64");
  const k2 = randomBytes(32).toString("base64");
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "consent-rotation-"));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it("finds records under the old key while it is listed, moves each to the new key as it is written, and writes new ones under the new key", async () => {
    const first = await startTestService({ gateway: true, dataDir, identityKeys: [k1] });
    const key = (await mintKey(first, await createTeam(first, "enterprise"))).key;
    const { publicId } = await createBanner(first, key);
    const old = { bannerId: publicId, subjectId: "written-under-k1" };
    const kept = { bannerId: publicId, subjectId: "never-written-again" };
    const neu = { bannerId: publicId, subjectId: "written-under-k2" };
    for (const subject of [old, kept]) {
      await http(first, "PUT", "/api/v1/consent/subjects/state", {
        key,
        body: { ...subject, baseVersion: 0, consentState: consentState() },
      });
    }
    await first.close();

    const rotated = await startTestService({ gateway: true, dataDir, identityKeys: [k2, k1] });
    expect(
      (await http(rotated, "POST", "/api/v1/consent/subjects/resolve", { key, body: old })).body
        .data.version,
    ).toBe(1);
    const updated = await http(rotated, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...old, baseVersion: 1, consentState: consentState() },
    });
    expect(updated.body.data.version).toBe(2);
    await http(rotated, "PUT", "/api/v1/consent/subjects/state", {
      key,
      body: { ...neu, baseVersion: 0, consentState: consentState() },
    });
    await rotated.close();

    const retired = await startTestService({ gateway: true, dataDir, identityKeys: [k2] });
    const resolved = async (body: object) =>
      (await http(retired, "POST", "/api/v1/consent/subjects/resolve", { key, body })).body.data;
    // The record written during the rotation moved under the new key, so dropping the old one
    // loses nothing of it.
    expect(await resolved(neu)).toMatchObject({ found: true, version: 1 });
    expect(await resolved(old)).toMatchObject({ found: true, version: 2 });
    // One not written since stays under the old key: unreachable without it until it expires.
    expect(await resolved(kept)).toEqual({ found: false });
    await retired.close();
  });
});

function omitSuccess(data: Record<string, unknown> | undefined) {
  const { success: _success, ...rest } = data ?? {};
  return rest;
}
