import { describe, expect, it } from "vitest";
import {
  emptyDatabase,
  type StandInKind,
  startWireStandIn,
} from "#daemon/store/mongo-wire-stand-in.js";
import {
  DAEMON_URL,
  logLines,
  PROGRAMS,
  startProgram,
  useProgramRoot,
} from "#test/support/processes.js";

/** The start of the warning a daemon logs on a MongoDB server outside any replica set. */
const STANDALONE = /^MongoDB at 127\.0\.0\.1:\d+ is a standalone server, not a replica set: /;

/**
 * consentd over a wire-protocol stand-in for MongoDB (mongo-wire-stand-in.ts) that is what `kind`
 * says: the warnings its start logs, once it serves.
 */
async function startWarnings(dataDir: string, kind: StandInKind) {
  const server = await startWireStandIn(emptyDatabase().answer, kind);
  try {
    const daemon = startProgram(PROGRAMS.consentd, {
      CONSENT_DATA_DIR: dataDir,
      MONGODB_URI: server.uri("shop"),
    });
    await daemon.waitFor(DAEMON_URL);
    expect(await daemon.stop()).toBe(0);
    return logLines(daemon).filter((line) => line.level === 40);
  } finally {
    await server.close();
  }
}

/**
 * The two tests run side by side: each has a stand-in server, a daemon and a data dir of its own,
 * and spends most of its time waiting for its daemon to start and stop.
 */
describe("consentd's start on MongoDB", { timeout: 60_000, concurrent: true }, () => {
  const root = useProgramRoot("consent-mongo-standalone-");

  it("warns once, on a standalone server, of what it lacks there and how to have it", async () => {
    const warnings = await startWarnings(root.join("standalone"), { standalone: true });
    expect(warnings).toEqual([
      expect.objectContaining({ service: "consentd", msg: expect.stringMatching(STANDALONE) }),
    ]);
    const { msg } = warnings[0] as { msg: string };
    // What does not work there: failover, a second copy, the one transaction.
    expect(msg).toContain("no failover");
    expect(msg).toContain("no second copy of the records");
    expect(msg).toContain("not moved under the current key in a transaction");
    expect(msg).toContain("rs.initiate()");
  });

  it("says nothing of it on the primary of a replica set", async () => {
    expect(await startWarnings(root.join("replica-set"), {})).toEqual([]);
  });
});
