import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the receiver got. */
export interface ReceivedWebhook {
  /** The request's path and query, as the endpoint's URL gave them. */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * What the receiver answers: a status and optional headers and body. `unfinished`: the status,
 * headers and body are sent, but the response never ends (a receiver that stalls mid-body).
 */
export type Answer = {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  unfinished?: boolean;
};

/** Makes the receiver hang: a promise that never settles, for an answer that never comes. */
export const NEVER: Promise<Answer> = new Promise<Answer>(() => {});

/**
 * A real HTTP endpoint on 127.0.0.1 recording every webhook it receives. `answer` decides the
 * response (200 by default); `stop()` closes the port and `start()` reopens it on the same port,
 * so a test can take the integrator's endpoint down and bring it back.
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  /** TCP connections accepted so far (a keep-alive connection carries many requests). */
  connections = 0;
  /** The response to a request; a promise delays it (NEVER: the request hangs until stop()). */
  answer: (request: ReceivedWebhook) => Answer | Promise<Answer> = () => ({
    status: 200,
    body: "ok",
  });
  private server: Server | undefined;
  private port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  async start(): Promise<this> {
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", async () => {
        const received = {
          url: request.url ?? "",
          headers: request.headers,
          body: Buffer.concat(chunks).toString("utf8"),
        };
        this.received.push(received);
        const answer = await this.answer(received);
        response.writeHead(answer.status, answer.headers);
        if (answer.unfinished) response.write(answer.body ?? "");
        else response.end(answer.body ?? "");
      });
    });
    // Idle connections stay open as long as the daemon keeps them (30 s), not Node's 5 s, so a
    // slow test does not see a reconnection it did not cause.
    server.keepAliveTimeout = 60_000;
    server.on("connection", () => {
      this.connections++;
    });
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Bodies received, parsed. */
  events(): { type: string; data: Record<string, unknown> }[] {
    return this.received.map((r) => JSON.parse(r.body));
  }
}

/** Polls `check` until it returns a value other than undefined (the condition, not a duration, is the assertion). */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
