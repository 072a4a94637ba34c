import type { Client } from "@grpc/grpc-js";
import { credentials, status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bulkyTexts,
  consentState,
  createBanner,
  createTeam,
  http,
  mintKey,
} from "#test/support/api.js";
import {
  addressOf,
  bearer,
  fromStruct,
  loadConsentProtos,
  responseOf,
  type SnapshotObject,
  toStruct,
  unary,
} from "#test/support/grpc-js.js";
import { startTestService, type TestService } from "#test/support/service.js";

/** grpc-js' values of `grpc.default_compression_algorithm`. */
const DEFLATE = 1;
const GZIP = 2;

/**
 * An internal service on grpc-js may compress its messages (`grpc.default_compression_algorithm`):
 * the daemon reads gzip, and refuses an encoding it does not read (deflate) as the gRPC protocol
 * says, UNIMPLEMENTED with `grpc-accept-encoding` naming those it does, after which grpc-js
 * sends that channel's calls uncompressed.
 */
describe("compressed messages from grpc-js", () => {
  let service: TestService;
  let key: string;
  let publicId: string;
  const clients: Client[] = [];
  /** A client of `name` on a channel of its own that compresses its messages with `algorithm`. */
  const compressing = (name: "BannerService" | "SubjectService", algorithm: number) => {
    const { consent } = loadConsentProtos();
    const client = new consent.v1[name](
      addressOf(service.daemonUrl),
      credentials.createInsecure(),
      { "grpc.default_compression_algorithm": algorithm },
    );
    clients.push(client);
    return client;
  };
  let n = 0;
  const firstWrite = () => ({
    bannerId: publicId,
    subjectId: `compressed-${++n}`,
    namespace: "app",
    baseVersion: 0,
    consentState: toStruct(consentState()),
  });
  const resolvedOverRest = (write: { bannerId: string; subjectId: string; namespace: string }) =>
    http(service, "POST", "/api/v1/consent/subjects/resolve", {
      key,
      body: { bannerId: write.bannerId, subjectId: write.subjectId, namespace: write.namespace },
    });

  beforeAll(async () => {
    service = await startTestService({ gateway: true });
    ({ key } = await mintKey(service, await createTeam(service, "professional")));
    ({ publicId } = await createBanner(service, key));
  });
  afterAll(async () => {
    for (const client of clients) client.close();
    await service?.close();
  });

  it("reads a gzip message as the same message uncompressed", async () => {
    const subjects = compressing("SubjectService", GZIP);
    const write = firstWrite();
    const written = await unary<{ snapshot: SnapshotObject }>(
      subjects,
      "PutSubjectState",
      write,
      bearer(key),
    );
    expect(responseOf(written).snapshot.version).toBe(1);
    expect(fromStruct(responseOf(written).snapshot.consentState)).toEqual(consentState());
    expect((await resolvedOverRest(write)).body.data).toMatchObject({ found: true, version: 1 });
  });

  it("refuses a deflate message UNIMPLEMENTED, naming what it reads, then takes the channel's calls uncompressed", async () => {
    const subjects = compressing("SubjectService", DEFLATE);
    const refusedWrite = firstWrite();
    const refused = await unary(subjects, "PutSubjectState", refusedWrite, bearer(key));
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect([refused.error.code, refused.error.details]).toEqual([
      status.UNIMPLEMENTED,
      'unknown compression "deflate": supported encodings are gzip,br',
    ]);
    expect(refused.error.metadata.get("grpc-accept-encoding")).toEqual(["gzip,br"]);
    expect((await resolvedOverRest(refusedWrite)).body.data).toMatchObject({ found: false });
    const write = firstWrite();
    const written = await unary(subjects, "PutSubjectState", write, bearer(key));
    expect(written).toMatchObject({ ok: true, response: { snapshot: { version: 1 } } });
    expect((await resolvedOverRest(write)).body.data).toMatchObject({ found: true, version: 1 });
  });

  it("sends a large answer gzip-compressed to a caller that reads gzip, as REST's", async () => {
    const banners = compressing("BannerService", GZIP);
    const { id } = await createBanner(service, key, { configuration: { texts: bulkyTexts() } });
    const read = await unary<{ banner: { configuration: { texts: Record<string, unknown> } } }>(
      banners,
      "GetBanner",
      { id },
      bearer(key),
    );
    const overRest = await http(service, "GET", `/api/v1/banners/${id}`, { key });
    const texts = responseOf(read).banner.configuration.texts;
    expect(Object.keys(texts).length).toBeGreaterThanOrEqual(100);
    expect(texts.qaa).toMatchObject(overRest.body.data.banner.configuration.texts.qaa);
  });
});
