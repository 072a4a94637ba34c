import type { FastifyInstance, FastifyReply } from "fastify";
import type { DaemonClients } from "#gateway/daemon-clients.js";
import { sendData, sendDataWithJsonMember } from "#gateway/envelope.js";
import { snapshotFields, snapshotJson, utf8 } from "#gateway/json.js";
import { type Relay, rawBody, readOptions, relayOptions } from "#gateway/relay.js";
import { routePath } from "#gateway/v1/methods.js";
import type { SubjectSnapshot } from "#gen/consent/v1/subject_pb.js";

/**
 * spec 4.5-4.7: the cross-device consent endpoints. Bodies go to the daemon verbatim; it checks
 * credentials, limits and the body (with its 20 KB rule) in the order of decisions §2.
 */
export function subjectRoutes(app: FastifyInstance, clients: DaemonClients, relay: Relay): void {
  routePath(app, "/consent/subjects/resolve", "key", {
    async POST(request, reply) {
      const { found, snapshot } = await clients.subjects.resolveSubject(
        { json: rawBody(request), consentStateAsJson: true },
        readOptions(request, reply, relay),
      );
      // decisions §4: no snapshot → { found: false } and nothing else.
      if (!found || !snapshot) return sendData(reply, 200, { found: false });
      return sendSnapshot(reply, { found: true }, snapshot);
    },
  });

  routePath(app, "/consent/subjects/state", "key", {
    async PUT(request, reply) {
      const { snapshot } = await clients.subjects.putSubjectState(
        { json: rawBody(request), consentStateAsJson: true },
        relayOptions(request, reply, relay),
      );
      if (!snapshot) return sendData(reply, 200, { success: true });
      return sendSnapshot(reply, { success: true }, snapshot);
    },
    async DELETE(request, reply) {
      const { deleted } = await clients.subjects.deleteSubjectState(
        { json: rawBody(request) },
        relayOptions(request, reply, relay),
      );
      return sendData(reply, 200, { success: true, deleted });
    },
  });
}

/**
 * A 200 with `lead` and the snapshot (spec 2.3). The state comes as JSON text, as the routes ask,
 * and goes out as it is; a daemon that predates consent_state_as_json sends a Struct, serialised
 * here.
 */
function sendSnapshot(
  reply: FastifyReply,
  lead: Record<string, unknown>,
  snapshot: SubjectSnapshot,
): FastifyReply {
  if (snapshot.consentStateJson === undefined) {
    return sendData(reply, 200, { ...lead, ...snapshotJson(snapshot) });
  }
  return sendDataWithJsonMember(reply, 200, {
    before: lead,
    name: "consentState",
    json: utf8(snapshot.consentStateJson),
    after: snapshotFields(snapshot),
  });
}
