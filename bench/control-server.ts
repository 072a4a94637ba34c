import { readFile } from "node:fs/promises";
import { fastify } from "fastify";

/**
 * The benchmark's control: a bare Fastify doing only "the same JSON parse and reply" as each
 * measured route, in its own process, so the ratio shows what the service adds on top of HTTP and
 * JSON. Each route parses the request body with Fastify's own JSON parser (secure-json-parse, the
 * parser the daemon uses), `text/plain` bodies too (the log route accepts them), and replies with
 * the very envelope the service gave for that route (captured by the benchmark's probe), so
 * request and response sizes match.
 *
 * Run as `node --import tsx bench/control-server.ts <port> <routes.json> [trust proxy list]`; only
 * types may be imported from this file.
 */

/** One measured route as the control serves it. */
export interface ControlRoute {
  method: string;
  url: string;
  /** The JSON body of the service's response to the same request. */
  reply: unknown;
}

async function main([port = "0", templatesFile = "", trustProxy = ""]: string[]) {
  const routes = JSON.parse(await readFile(templatesFile, "utf8")) as ControlRoute[];
  // The same proxy trust as the service's gateway.
  const app = fastify({ trustProxy: trustProxy ? trustProxy.split(",") : false });
  app.removeContentTypeParser("text/plain");
  app.addContentTypeParser(
    "text/plain",
    { parseAs: "string" },
    app.getDefaultJsonParser("error", "error"),
  );
  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.url,
      // Fastify has parsed the JSON body before the handler runs; the reply is serialised per call.
      handler: async () => route.reply,
    });
  }
  app.get("/health", async () => ({ status: "ok" }));
  await app.listen({ host: "127.0.0.1", port: Number(port) });
  process.once("SIGTERM", () => void app.close().then(() => process.exit(0)));
}

await main(process.argv.slice(2));
