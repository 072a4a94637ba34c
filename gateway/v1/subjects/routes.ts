import type { FastifyInstance } from "fastify";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendData } from "#gateway/envelope.js";
import { snapshotJson } from "#gateway/json.js";
import { rawBody, relayOptions } from "#gateway/relay.js";
import { routePath } from "#gateway/v1/methods.js";

/**
 * spec 4.5-4.7: the cross-device consent endpoints. Bodies go to the daemon verbatim; it checks
 * credentials, limits and the body (with its 20 KB rule) in the order of decisions §2.
 */
export function subjectRoutes(
  app: FastifyInstance,
  clients: DaemonClients,
  operatorToken: string,
): void {
  routePath(app, "/consent/subjects/resolve", {
    async POST(request, reply) {
      const { found, snapshot } = await clients.subjects.resolveSubject(
        { json: rawBody(request) },
        relayOptions(request, reply, operatorToken),
      );
      // decisions §4: no snapshot → { found: false } and nothing else.
      return sendData(
        reply,
        200,
        found && snapshot ? { found: true, ...snapshotJson(snapshot) } : { found: false },
      );
    },
  });

  routePath(app, "/consent/subjects/state", {
    async PUT(request, reply) {
      const { snapshot } = await clients.subjects.putSubjectState(
        { json: rawBody(request) },
        relayOptions(request, reply, operatorToken),
      );
      return sendData(reply, 200, { success: true, ...(snapshot ? snapshotJson(snapshot) : {}) });
    },
    async DELETE(request, reply) {
      const { deleted } = await clients.subjects.deleteSubjectState(
        { json: rawBody(request) },
        relayOptions(request, reply, operatorToken),
      );
      return sendData(reply, 200, { success: true, deleted });
    },
  });
}
