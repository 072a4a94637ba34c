import type { Client, ClientReadableStream } from "@grpc/grpc-js";
import { credentials, Metadata, status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_TAILS_PER_TEAM } from "#daemon/consent-log/consent-log-reads.js";
import { MAX_WATCHES_PER_CLIENT } from "#daemon/health/health-service.js";
import { createBanner, createTeam, mintKey } from "#test/support/api.js";
import { addressOf, bearer, loadConsentProtos } from "#test/support/grpc-js.js";
import { startTestService, type TestService } from "#test/support/service.js";

type ServerStream = (request: object, metadata: Metadata) => ClientReadableStream<unknown>;

/** A server stream as grpc-js opens it: its first message, and how it ended. */
function open(client: Client, method: string, request: object, metadata: Metadata) {
  const call = (client as unknown as Record<string, ServerStream>)[method]?.call(
    client,
    request,
    metadata,
  ) as ClientReadableStream<unknown>;
  const first = new Promise((resolve) => call.once("data", resolve));
  const ended = new Promise<number>((resolve) => {
    call.on("error", (error: { code: number }) => resolve(error.code));
    call.on("end", () => resolve(status.OK));
  });
  return { call, first, ended };
}

/**
 * An internal service on grpc-js cancels the server streams it no longer wants (a tail, a health
 * watch) whenever it likes, before their first message or after: the daemon lets each go as the
 * caller's choice, with nothing logged, and frees its place among the streams it bounds.
 */
describe("server streams a grpc-js caller cancels", () => {
  let service: TestService;
  let key: string;
  let publicId: string;
  let logs: Client;
  let health: Client;
  const logged: Record<string, unknown>[] = [];

  beforeAll(async () => {
    service = await startTestService({ gateway: true, onLog: (entry) => logged.push(entry) });
    ({ key } = await mintKey(service, await createTeam(service, "professional")));
    ({ publicId } = await createBanner(service, key));
    const { consent, grpc } = loadConsentProtos();
    const address = addressOf(service.daemonUrl);
    logs = new consent.v1.ConsentLogService(address, credentials.createInsecure());
    health = new grpc.health.v1.Health(address, credentials.createInsecure());
  });
  afterAll(async () => {
    logs?.close();
    health?.close();
    await service?.close();
  });

  it.each([
    [
      "TailConsentLogs",
      MAX_TAILS_PER_TEAM,
      () => [logs, { bannerId: publicId }, bearer(key)] as const,
    ],
    ["Watch", MAX_WATCHES_PER_CLIENT, () => [health, { service: "" }, new Metadata()] as const],
  ])(
    "%s: cancelled at once or after its first message, logs nothing and frees its place",
    async (method, places, args) => {
      const [client, request, metadata] = args();
      logged.length = 0;
      for (let n = 0; n < 40; n++) {
        const atOnce = open(client, method, request, metadata);
        setImmediate(() => atOnce.call.cancel());
        expect(await atOnce.ended).toBe(status.CANCELLED);
        const later = open(client, method, request, metadata);
        await later.first;
        later.call.cancel();
        expect(await later.ended).toBe(status.CANCELLED);
      }
      // Every place is free again once the daemon has seen the last cancellations.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const all = Array.from({ length: places }, () => open(client, method, request, metadata));
      await Promise.all(all.map((stream) => stream.first));
      for (const stream of all) stream.call.cancel();
      await Promise.all(all.map((stream) => stream.ended));
      expect(logged.filter((entry) => Number(entry.level) >= 50)).toEqual([]);
    },
  );
});
