import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http, rawHttp } from "#test/support/api.js";
import { rawExchange } from "#test/support/raw-http1.js";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * JSON answers carry X-Content-Type-Options: nosniff, as the loader and the preferences page do:
 * a browser never reads one as a script or a page, whatever text of the request it echoes.
 */
describe("X-Content-Type-Options on JSON answers", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService({ gateway: true });
  });
  afterAll(async () => {
    await service.close();
  });

  it("is nosniff on a success, an error, a 404, a 405 and the log route's answers", async () => {
    const answers = {
      success: await http(service, "GET", "/api/v1/health"),
      error: await http(service, "GET", "/api/v1/banners"),
      notFound: await http(service, "GET", "/api/v1/no-such-resource"),
      outsideV1: await http(service, "GET", "/api/banners"),
      methodNotAllowed: await http(service, "DELETE", "/api/v1/health"),
      logRoute: await http(service, "POST", "/api/consent/log", { body: {} }),
      // A path the router cannot read: answered outside the routes (app.ts, unroutable).
      unreadable: await rawHttp(service, "GET", "/api/v1/%zz"),
    };
    expect(
      Object.fromEntries(
        Object.entries(answers).map(([name, answer]) => [
          name,
          [
            answer.status,
            answer.headers.get("content-type"),
            answer.headers.get("x-content-type-options"),
          ],
        ]),
      ),
    ).toEqual({
      success: [200, "application/json; charset=utf-8", "nosniff"],
      error: [401, "application/json; charset=utf-8", "nosniff"],
      notFound: [404, "application/json; charset=utf-8", "nosniff"],
      outsideV1: [404, "application/json; charset=utf-8", "nosniff"],
      methodNotAllowed: [405, "application/json; charset=utf-8", "nosniff"],
      logRoute: [400, "application/json; charset=utf-8", "nosniff"],
      unreadable: [404, "application/json; charset=utf-8", "nosniff"],
    });
  });

  it("is nosniff on the raw 400 of a request Node's parser refuses (route-families.ts)", async () => {
    const port = Number(new URL(service.gatewayUrl).port);
    const answer = await rawExchange(port, (write) =>
      write("GET /api/v1/health HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n"),
    );
    expect(answer.status).toBe(400);
    expect(answer.headers).toContain("content-type: application/json; charset=utf-8");
    expect(answer.headers).toContain("x-content-type-options: nosniff");
  });
});
