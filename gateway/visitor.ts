import type { FastifyInstance } from "fastify";
import { consentLogRoutes } from "#gateway/consent-log/routes.js";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { loaderRoutes } from "#gateway/loader/routes.js";
import { preferencesRoutes } from "#gateway/preferences/routes.js";
import type { Relay } from "#gateway/relay.js";

export interface VisitorOptions {
  clients: DaemonClients;
  /** How requests reach the daemon with their client context (relay.ts). */
  relay: Relay;
  /** CONSENT_GEO_HEADER: a header from a trusted proxy naming the visitor's country. */
  geoHeader?: string;
  /** CONSENT_TRUST_PROXY: the peers whose geo header is believed. */
  trustProxy?: string[];
  /** Subscribes to banners' public changes (single-process mode), so the loader refreshes at once. */
  onPublicChange?: (listener: (publicId: string) => void) => void;
  /** How long the loader serves a banner before asking the daemon again. */
  loaderRevalidateMs?: number;
  /** The bound on the bytes of the loader responses kept in memory. */
  loaderCacheBytes?: number;
  /** How often a lasting outage is logged (GatewayOptions.repeatedFailureLogMs). */
  repeatedFailureLogMs?: number;
}

/**
 * The visitor side of the gateway, outside the versioned API: the consent-log route (spec 4.4,
 * decisions §5), the loader (decisions §6) and the preferences page. Bodies are not parsed here:
 * the bytes go to the daemon, which parses JSON with prototype-poisoning protection.
 */
export async function visitorSide(app: FastifyInstance, options: VisitorOptions): Promise<void> {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => done(null, body));
  await app.register(consentLogRoutes, options);
  await app.register(preferencesRoutes, options);
  await app.register(loaderRoutes, {
    ...options,
    revalidateMs: options.loaderRevalidateMs,
    maxBytes: options.loaderCacheBytes,
  });
}
