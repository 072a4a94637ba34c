import { subscribe, unsubscribe } from "node:diagnostics_channel";
import {
  type ClientRequest,
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ERROR_TEXT_MAX } from "#daemon/errors.js";
import { AddressGuard } from "#daemon/webhooks/address-guard.js";
import { DeliveryAgents, sendWebhook } from "#daemon/webhooks/webhook-sender.js";

const headers = { "webhook-id": "evt_1", "webhook-timestamp": "1", "webhook-signature": "v1,x" };
const guard = new AddressGuard(["127.0.0.1/32"]);

/**
 * Node publishes each answer an HTTP client receives here, as its status and headers arrive and
 * before the client's own `response` listeners are given it.
 */
const CLIENT_RESPONSES = "http.client.response.finish";

/**
 * Resolves once the answer to a request to `url` has reached its sender: its status, and the
 * first bytes of its body, which the sender's reading (listening after this one) is handed in
 * the same `data` event, before this resolves.
 */
function answerArrived(url: string): Promise<void> {
  const { host, pathname } = new URL(url);
  return new Promise((resolve) => {
    const onResponse = (message: unknown) => {
      const { request, response } = message as {
        request: ClientRequest;
        response: IncomingMessage;
      };
      if (request.getHeader("host") !== host || request.path !== pathname) return;
      unsubscribe(CLIENT_RESPONSES, onResponse);
      response.once("data", () => resolve());
    };
    subscribe(CLIENT_RESPONSES, onResponse);
  });
}

describe("sendWebhook over kept-alive connections", () => {
  let server: Server | undefined;
  let agents: DeliveryAgents | undefined;
  afterEach(async () => {
    agents?.destroy();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  /**
   * An endpoint on loopback; `handle` decides each request, told whether it is the first on its
   * connection. `seen` counts connections, requests, and those answered through `answer`.
   */
  async function endpoint(
    handle: (request: IncomingMessage, response: ServerResponse, first: boolean) => void,
  ) {
    const seen = { connections: 0, requests: 0, answered: 0 };
    server = createServer((request, response) => {
      seen.requests++;
      const socket = request.socket as typeof request.socket & { served?: boolean };
      const first = !socket.served;
      socket.served = true;
      handle(request, response, first);
    });
    server.on("connection", () => {
      seen.connections++;
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    /** Reads the request and answers 204. */
    const answer = (request: IncomingMessage, response: ServerResponse) => {
      request.resume();
      request.on("end", () => {
        seen.answered++;
        response.writeHead(204).end();
      });
    };
    return { url: `http://127.0.0.1:${port}/hooks`, seen, answer };
  }

  /** Two sends over one DeliveryAgents; the outcome of each. */
  async function twoSends(url: string) {
    agents = new DeliveryAgents();
    const send = () => sendWebhook({ url, headers, body: "{}", guard, agents });
    return [await send(), await send()];
  }

  it("sends nothing for a call that already ended, and ends an attempt when its call does", async () => {
    const { url, seen } = await endpoint(() => {}); // never answers
    const before = new AbortController();
    before.abort();
    const ended = {
      ok: false,
      statusCode: 0,
      error: "the call ended before the endpoint answered",
      abandoned: true,
    };
    expect(await sendWebhook({ url, headers, body: "{}", guard, signal: before.signal })).toEqual(
      ended,
    );
    expect(seen.connections).toBe(0);
    const during = new AbortController();
    const attempt = sendWebhook({ url, headers, body: "{}", guard, signal: during.signal });
    await expect.poll(() => seen.requests).toBe(1);
    during.abort();
    expect(await attempt).toEqual(ended);
    // The attempt's connection is closed with it, not left to the endpoint.
    const open = () =>
      new Promise<number>((resolve) => server?.getConnections((_error, count) => resolve(count)));
    await expect.poll(open).toBe(0);
  });

  it("ends an attempt whose status has arrived with that status when its signal is aborted", async () => {
    // A 2xx whose body never ends: acknowledged, so never reported as abandoned (and sent again).
    const { url, seen } = await endpoint((request, response) => {
      request.resume();
      response.writeHead(202, { "content-length": "100" });
      response.write("accepted");
    });
    const shutdown = new AbortController();
    const arrived = answerArrived(url);
    const attempt = sendWebhook({ url, headers, body: "{}", guard, signal: shutdown.signal });
    await arrived;
    expect(seen.requests).toBe(1);
    shutdown.abort();
    const outcome = await attempt;
    expect(outcome).toEqual({ ok: true, statusCode: 202, excerpt: "accepted" });
  });

  it("resends once on a new connection when a reused one was closed before any answer", async () => {
    // Like a server closing an idle connection just as a request arrives: the second request on
    // a connection is dropped unanswered.
    const hooks = await endpoint((request, response, first) => {
      if (first) hooks.answer(request, response);
      else request.socket.destroy();
    });
    const outcomes = await twoSends(hooks.url);
    expect(outcomes).toMatchObject([
      { ok: true, statusCode: 204 },
      { ok: true, statusCode: 204 },
    ]);
    // The second send met the closing connection, then succeeded on a new one.
    expect(hooks.seen).toEqual({ connections: 2, requests: 3, answered: 2 });
  });

  it("does not resend once the endpoint has begun to answer on a reused connection", async () => {
    const hooks = await endpoint((request, response, first) => {
      if (first) return hooks.answer(request, response);
      request.resume();
      // The answer begins, then the connection is reset mid-body.
      response.writeHead(500, { "content-length": "100" });
      response.write("partial");
      setTimeout(() => request.socket.resetAndDestroy(), 20);
    });
    const [first, second] = await twoSends(hooks.url);
    expect(first).toMatchObject({ ok: true, statusCode: 204 });
    // The reset or the cut answer, whichever Node reports first: a failed attempt either way.
    expect(second).toMatchObject({
      ok: false,
      error: expect.stringMatching(/ECONNRESET|answered 500/),
    });
    // Sent once, on the one kept-alive connection: no second copy after an answer had begun.
    expect(hooks.seen).toMatchObject({ connections: 1, requests: 2 });
  });

  it("does not resend when the connection was new (the endpoint itself failed)", async () => {
    const hooks = await endpoint((request) => request.socket.destroy());
    agents = new DeliveryAgents();
    const outcome = await sendWebhook({ url: hooks.url, headers, body: "{}", guard, agents });
    expect(outcome).toMatchObject({ ok: false, statusCode: 0 });
    expect(outcome.error).toMatch(/ECONNRESET/);
    expect(hooks.seen.requests).toBe(1);
  });
});

describe("sendWebhook's failures", () => {
  it("keeps a failure's text within the bound of every error text, however long what it quotes", async () => {
    // A URL may hold a host name of 2,000 characters; the resolver refuses it, quoted whole.
    const host = `${"a".repeat(2_000)}.example`;
    const outcome = await sendWebhook({ url: `https://${host}/hooks`, headers, body: "{}", guard });
    expect(outcome.ok).toBe(false);
    expect(outcome.error?.length).toBe(ERROR_TEXT_MAX);
    expect(outcome.error).toMatch(/^a{400}.*…$/);
  });
});
