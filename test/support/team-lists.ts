import http2 from "node:http2";
import { expect } from "vitest";
import { bulkyTexts, http } from "#test/support/api.js";
import type { TestService } from "#test/support/service.js";

/**
 * Gives the team of `key` enough banners that its lists are queued one after another in the
 * daemon (daemon/banners/banner-service.ts, QUEUED_LIST_SIZE), one of them near the largest a
 * banner may be: a list far beyond what an HTTP/2 stream takes before its reader reads (64 KB).
 */
export async function fillForQueuedLists(service: TestService, key: string): Promise<void> {
  const create = (name: string, domain: string, configuration: object) =>
    http(service, "POST", "/api/v1/banners", {
      key,
      body: { name, domain, configuration },
    });
  const banners = Array.from({ length: 50 }, (_, n) => n);
  for (const batch of [banners.slice(0, 25), banners.slice(25)]) {
    const created = await Promise.all(
      batch.map((n) => create(`Site ${n}`, `site${n}.example.com`, {})),
    );
    expect(created.map((result) => result.status)).toEqual(batch.map(() => 201));
  }
  const bulky = await create("Bulky", "bulky.example.com", { texts: bulkyTexts() });
  expect(bulky.status).toBe(201);
}

/**
 * A team's banner list asked of the daemon the stand-alone gateway's way (binary Connect unary),
 * on a connection of its own, with `headers` added (a connect-timeout-ms); with `reading: false`
 * its answer is left unread until read(), so the daemon holds the team's next list behind it (the
 * answer has not left).
 */
export function listOnItsOwnConnection(
  daemonUrl: string,
  key: string,
  { reading = true, headers = {} as Record<string, string> } = {},
) {
  const session = http2.connect(daemonUrl);
  session.on("error", () => {});
  const stream = session.request({
    ":method": "POST",
    ":path": "/consent.v1.BannerService/ListBanners",
    "content-type": "application/proto",
    "connect-protocol-version": "1",
    authorization: `Bearer ${key}`,
    ...headers,
  });
  stream.end();
  if (!reading) stream.pause();
  let started = false;
  const answerStarted = new Promise<number>((resolve) => {
    stream.once("response", (headers) => {
      started = true;
      resolve(Number(headers[":status"]));
    });
  });
  const body = answerStarted.then(
    (status) =>
      new Promise<{ status: number; bytes: number; text: string }>((resolve, reject) => {
        const chunks: Buffer[] = [];
        stream.on("data", (chunk: Buffer) => {
          chunks.push(chunk);
        });
        stream.once("end", () => {
          session.close();
          const body = Buffer.concat(chunks);
          resolve({ status, bytes: body.length, text: body.toString() });
        });
        stream.once("error", reject);
      }),
  );
  return { answerStarted, body, started: () => started, read: () => stream.resume() };
}
