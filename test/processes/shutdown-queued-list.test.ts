import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { PASSING_OUTAGE_RETRY_AFTER_SECONDS } from "#daemon/errors.js";
import { createTeam, http, mintKey } from "#test/support/api.js";
import { logLines, startSplitService, useProgramRoot } from "#test/support/processes.js";
import { fillForQueuedLists, listOnItsOwnConnection } from "#test/support/team-lists.js";

/** The daemon's drain limit here: its calls in flight are aborted at half of it (daemon/server.ts). */
const DRAIN_MS = 4_000;

/**
 * A team's banner list waiting in the daemon behind the team's list before it
 * (daemon/banners/banner-service.ts) when consentd is told to stop: its REST client, still
 * waiting, is told the service is unavailable (spec 7, 5xx retried), as for any call the
 * shutdown ended.
 */
describe("SIGTERM on consentd with a team's list queued", { timeout: 60_000 }, () => {
  const dirs = useProgramRoot("consent-shutdown-queued-list-");

  // Regression: the queued list ended CANCELED, "the caller has left", whatever ended it, and the
  // gateway answered its client, who had not left, 500 internal_error and logged a failure.
  it("answers the REST list waiting behind an unread one 503 unavailable, with no failure logged", async () => {
    const drain = { CONSENT_DRAIN_TIMEOUT_MS: String(DRAIN_MS) };
    const { daemon, gateway, service } = await startSplitService(dirs.join("split"), drain, drain);
    const key = (await mintKey(service, await createTeam(service))).key;
    await fillForQueuedLists(service, key);

    // The team's first list is answered on a connection whose reader reads nothing yet: the
    // team's next list waits until that answer has left.
    const stalled = listOnItsOwnConnection(service.daemonUrl, key, { reading: false });
    expect(await stalled.answerStarted).toBe(200);
    const queued = http(service, "GET", "/api/v1/banners", { key });
    await sleep(300);

    daemon.program.child.kill("SIGTERM");
    // Past the abort of the calls in flight (at DRAIN_MS / 2), before the drain's cut.
    await sleep(DRAIN_MS / 2 + 500);
    stalled.read();
    expect((await stalled.body).status).toBe(200);

    const answered = await queued;
    expect([answered.status, answered.headers.get("retry-after"), answered.body]).toEqual([
      503,
      String(PASSING_OUTAGE_RETRY_AFTER_SECONDS),
      {
        data: {
          error: "The service is temporarily unavailable; retry later",
          code: "unavailable",
        },
        version: "v1",
      },
    ]);
    expect(await daemon.program.exitWithin(DRAIN_MS)).toBe(0);
    // Nothing failed: the daemon ended the call as it stopped, as the client is told.
    expect(
      logLines(gateway).filter((line) => Number(line.level) >= 50 || line.msg === "request failed"),
    ).toEqual([]);
  });
});
