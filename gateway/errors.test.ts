import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { buildGateway } from "#gateway/app.js";
import { BannerService } from "#gen/consent/v1/banner_pb.js";
import { SubjectService } from "#gen/consent/v1/subject_pb.js";

/**
 * failureOf logs a read cancelled because its client left at debug only (docs/behaviour.md, "A
 * client that leaves"). A client still there that is answered 500 for a cancelled call is no such
 * read: the operator is told of that 500 as of any other.
 */
describe("a call cancelled while its REST client is still there", () => {
  const lines: { level: number; msg: string }[] = [];
  let app: Awaited<ReturnType<typeof buildGateway>>;
  let url: string;

  beforeAll(async () => {
    // A daemon stand-in that answers its reads CANCELED, as the daemon answers a call it gave up.
    const canceled = () => {
      throw new ConnectError("the caller has left", Code.Canceled);
    };
    const transport = createRouterTransport((router) => {
      router.service(SubjectService, { resolveSubject: canceled });
      router.service(BannerService, { listBanners: canceled });
    });
    app = await buildGateway({
      transport,
      inProcess: true,
      operatorToken: generateOperatorToken(),
      trustProxy: [],
      logger: pino({ level: "debug" }, { write: (line: string) => lines.push(JSON.parse(line)) }),
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  });
  afterAll(() => app.close());

  // Regression: the gateway took a request whose body it had read (Node marks such a request
  // destroyed) for a client gone, so a 500 answered to a client still waiting for it was logged
  // only at debug, as "the client left".
  it.for([
    [
      "POST",
      "/api/v1/consent/subjects/resolve",
      JSON.stringify({ bannerId: "8f5f3c1e-1d2b-4c3a-9e4f-5a6b7c8d9e0f", subjectId: "s" }),
    ],
    ["GET", "/api/v1/banners", undefined],
  ] as const)(
    "answers %s %s 500 internal_error and logs it as a failed request, not as a client that left",
    async ([method, path, body]) => {
      lines.length = 0;
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: "Bearer ck_live_x", "content-type": "application/json" },
        body,
      });
      expect(response.status).toBe(500);
      expect(await response.json()).toEqual({
        data: { error: "Internal server error", code: "internal_error" },
        version: "v1",
      });
      expect(lines.filter((line) => line.msg.includes("the client left"))).toEqual([]);
      expect(lines.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([
        "request failed",
      ]);
    },
  );
});
