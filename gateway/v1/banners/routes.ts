import type { FastifyInstance, FastifyRequest } from "fastify";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendData } from "#gateway/envelope.js";
import { bannerJson } from "#gateway/json.js";
import { type Relay, rawBody, readOptions, relayOptions } from "#gateway/relay.js";
import { routePath } from "#gateway/v1/methods.js";

const idOf = (request: FastifyRequest) => (request.params as { id: string }).id;

/**
 * spec 4.2-4.3 and decisions §3: banners, by API key or dashboard session. An edit or a publish
 * is told to `onBannerWritten`, so this gateway's loader serves it at once.
 */
export function bannerRoutes(
  app: FastifyInstance,
  clients: DaemonClients,
  relay: Relay,
  onBannerWritten: (publicId: string) => void,
): void {
  routePath(app, "/banners", "key or session", {
    async GET(request, reply) {
      const { banners } = await clients.banners.listBanners({}, readOptions(request, reply, relay));
      return sendData(reply, 200, { banners: banners.map(bannerJson) });
    },
    async POST(request, reply) {
      const { banner } = await clients.banners.createBanner(
        { json: rawBody(request) },
        relayOptions(request, reply, relay),
      );
      return sendData(reply, 201, { banner: banner && bannerJson(banner) });
    },
  });

  routePath(app, "/banners/:id", "key or session", {
    async GET(request, reply) {
      const { banner } = await clients.banners.getBanner(
        { id: idOf(request) },
        readOptions(request, reply, relay),
      );
      return sendData(reply, 200, { banner: banner && bannerJson(banner) });
    },
    async PATCH(request, reply) {
      const { banner } = await clients.banners.updateBanner(
        { id: idOf(request), json: rawBody(request) },
        relayOptions(request, reply, relay),
      );
      if (banner) onBannerWritten(banner.publicId);
      return sendData(reply, 200, { banner: banner && bannerJson(banner) });
    },
  });

  routePath(app, "/banners/:id/publish", "key or session", {
    async POST(request, reply) {
      const { banner } = await clients.banners.publishBanner(
        { id: idOf(request) },
        relayOptions(request, reply, relay),
      );
      if (banner) onBannerWritten(banner.publicId);
      return sendData(reply, 200, { banner: banner && bannerJson(banner) });
    },
  });
}
