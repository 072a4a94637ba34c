import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { DeliveryAgents, sendWebhook } from "#daemon/webhooks/webhook-sender.js";

const headers = { "webhook-id": "evt_1", "webhook-timestamp": "1", "webhook-signature": "v1,x" };
const guard = new AddressGuard(["127.0.0.1/32"]);

describe("sendWebhook over kept-alive connections", () => {
  let server: Server | undefined;
  let agents: DeliveryAgents | undefined;
  afterEach(async () => {
    agents?.destroy();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  /**
   * An endpoint that answers the first request of each connection and, like a server closing an
   * idle connection just as a request arrives, drops the connection on the next one unanswered.
   */
  async function closingEndpoint() {
    const seen = { connections: 0, requests: 0, answered: 0 };
    server = createServer((request, response) => {
      seen.requests++;
      const socket = request.socket as typeof request.socket & { served?: boolean };
      if (socket.served) {
        socket.destroy();
        return;
      }
      socket.served = true;
      request.resume();
      request.on("end", () => {
        seen.answered++;
        response.writeHead(204).end();
      });
    });
    server.on("connection", () => {
      seen.connections++;
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}/hooks`, seen };
  }

  it("resends once on a new connection when a reused one was closed before any answer", async () => {
    const endpoint = await closingEndpoint();
    agents = new DeliveryAgents();
    const send = () => sendWebhook({ url: endpoint.url, headers, body: "{}", guard, agents });
    expect(await send()).toMatchObject({ ok: true, statusCode: 204 });
    expect(await send()).toMatchObject({ ok: true, statusCode: 204 });
    // The second send met the closing connection, then succeeded on a new one.
    expect(endpoint.seen).toEqual({ connections: 2, requests: 3, answered: 2 });
  });

  it("does not resend once the endpoint has begun to answer on a reused connection", async () => {
    const endpoint = await closingEndpoint();
    server?.removeAllListeners("request");
    server?.on("request", (request, response) => {
      endpoint.seen.requests++;
      const socket = request.socket as typeof request.socket & { served?: boolean };
      request.resume();
      if (!socket.served) {
        socket.served = true;
        request.on("end", () => response.writeHead(204).end());
        return;
      }
      // The answer begins, then the connection is reset mid-body.
      response.writeHead(500, { "content-length": "100" });
      response.write("partial");
      setTimeout(() => socket.resetAndDestroy(), 20);
    });
    agents = new DeliveryAgents();
    const send = () => sendWebhook({ url: endpoint.url, headers, body: "{}", guard, agents });
    expect(await send()).toMatchObject({ ok: true, statusCode: 204 });
    const outcome = await send();
    // The reset or the cut answer, whichever Node reports first: a failed attempt either way.
    expect(outcome).toMatchObject({
      ok: false,
      error: expect.stringMatching(/ECONNRESET|answered 500/),
    });
    // Sent once, on the one kept-alive connection: no second copy after an answer had begun.
    expect(endpoint.seen).toMatchObject({ connections: 1, requests: 2 });
  });

  it("does not resend when the connection was new (the endpoint itself failed)", async () => {
    const endpoint = await closingEndpoint();
    server?.removeAllListeners("request");
    server?.on("request", (request) => {
      endpoint.seen.requests++;
      request.socket.destroy();
    });
    agents = new DeliveryAgents();
    const outcome = await sendWebhook({ url: endpoint.url, headers, body: "{}", guard, agents });
    expect(outcome).toMatchObject({ ok: false, statusCode: 0 });
    expect(outcome.error).toMatch(/ECONNRESET/);
    expect(endpoint.seen.requests).toBe(1);
  });
});
