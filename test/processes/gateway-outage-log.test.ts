import { describe, expect, it, vi } from "vitest";
import { createTeam, http, mintKey } from "#test/support/api.js";
import { logLines, startSplitService, useProgramRoot } from "#test/support/processes.js";

const UNREACHABLE =
  "the daemon could not be reached or has not answered: requests are answered 503";
const ANSWERS_AGAIN = "the daemon answers again: requests are answered as it answers";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The stand-alone gateway's log while its daemon (consentd, another process) stops and starts
 * again on the same port: the requests answered 503 meanwhile are told once the daemon answers.
 */
describe("the log of a stand-alone gateway whose daemon restarts", { timeout: 90_000 }, () => {
  const dirs = useProgramRoot("consent-gateway-outage-log-");

  // Regression: the requests held back after the outage's first warning were told in a second
  // warning 10 s after the first, however soon the daemon was back, which read as a new outage;
  // and nothing said that the daemon answered again.
  it("says at once when the daemon answers again, counting the requests held back, and warns no more", async () => {
    const split = await startSplitService(dirs.join("data"), { CONSENT_LOG_LEVEL: "info" });
    const { gateway, service, restartDaemon } = split;
    let { daemon } = split;
    const { key } = await mintKey(service, await createTeam(service));
    const banners = () => http(service, "GET", "/api/v1/banners", { key });
    expect((await banners()).status).toBe(200);
    const outageLines = () =>
      logLines(gateway).filter((line) => line.msg === UNREACHABLE || line.msg === ANSWERS_AGAIN);

    expect(await daemon.program.stop()).toBe(0);
    const statuses = [await banners(), await banners(), await banners()].map((r) => r.status);
    expect(statuses).toEqual([503, 503, 503]);
    expect(outageLines()).toMatchObject([{ level: 40, msg: UNREACHABLE, failedRequests: 1 }]);
    const warnedAt = outageLines()[0]?.time as number;

    daemon = await restartDaemon();
    // The first request after the restart may still find the old connection going away.
    let failedAfterWarning = 2;
    let answer = await banners();
    while (answer.status === 503) {
      failedAfterWarning++;
      await pause(100);
      answer = await banners();
    }
    const answeredAt = Date.now();
    expect(answer.status).toBe(200);
    expect(answeredAt - warnedAt).toBeLessThan(9_000);
    // Written before the answer; read from the gateway's stdout pipe a moment later.
    await vi.waitFor(() => expect(outageLines()).toHaveLength(2), { timeout: 2_000 });
    expect(outageLines()).toMatchObject([
      { level: 40, msg: UNREACHABLE, failedRequests: 1 },
      { level: 30, msg: ANSWERS_AGAIN, failedRequests: failedAfterWarning },
    ]);
    expect(outageLines()[1]?.time as number).toBeLessThanOrEqual(answeredAt);
    expect(outageLines()[1]?.cause).toMatch(/^\[unavailable\] /);

    // Past the 10 s after the warning: no warning of requests the daemon was back for.
    await pause(warnedAt + 11_000 - Date.now());
    expect((await banners()).status).toBe(200);
    expect(outageLines()).toHaveLength(2);
  });
});
