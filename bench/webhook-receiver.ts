import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

/**
 * The integrator's endpoint for the `consent-log-webhook` scenario, in its own process so its
 * work is not the load generator's: answers every delivery 204 at once, verifies each with the
 * `standardwebhooks` library (as a receiver would) and counts distinct events.
 *   node --import tsx bench/webhook-receiver.ts <port>
 * `PUT /_bench/secret` (body: the endpoint's `whsec_` secret) arms verification;
 * `GET /_bench/stats` answers { received, events, verified, rejected, lastAt }.
 */

export interface ReceiverStats {
  /** Requests received (a retried event counts each time). */
  received: number;
  /** Distinct `webhook-id`s. */
  events: number;
  /** Requests whose signature verified with the endpoint's secret. */
  verified: number;
  rejected: number;
  /** Unix milliseconds of the last delivery, 0 before the first. */
  lastAt: number;
}

const port = Number(process.argv[2]);
let verifier: Webhook | undefined;
const seen = new Set<string>();
const stats: ReceiverStats = { received: 0, events: 0, verified: 0, rejected: 0, lastAt: 0 };

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on("data", (chunk: Buffer) => chunks.push(chunk));
  request.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    if (request.url === "/_bench/secret" && request.method === "PUT") {
      verifier = new Webhook(body.trim());
      response.writeHead(204).end();
      return;
    }
    if (request.url === "/_bench/stats") {
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(stats));
      return;
    }
    stats.received++;
    stats.lastAt = Date.now();
    const id = String(request.headers["webhook-id"] ?? "");
    if (!seen.has(id)) {
      seen.add(id);
      stats.events++;
    }
    try {
      if (!verifier) throw new Error("no secret yet");
      verifier.verify(body, request.headers as Record<string, string>);
      stats.verified++;
    } catch {
      stats.rejected++;
    }
    response.writeHead(204).end();
  });
});
server.keepAliveTimeout = 30_000;
server.listen(port, "127.0.0.1");
process.on("SIGTERM", () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
