import { setImmediate as turnOfLoop } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { AttemptsInFlight } from "#daemon/auth/attempts-in-flight.js";

/** A promise and the function that settles it. */
function deferred() {
  let resolve = () => {};
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

/** What `promise` came to within a few turns of the event loop, or "pending". */
async function soon(promise: Promise<unknown>): Promise<unknown> {
  const pending = Symbol("pending");
  const outcome = await Promise.race([
    promise.then(
      () => "ran",
      (error: unknown) => error,
    ),
    (async () => {
      for (let i = 0; i < 5; i++) await turnOfLoop();
      return pending;
    })(),
  ]);
  return outcome === pending ? "pending" : outcome;
}

describe("AttemptsInFlight", () => {
  const oneAtATime = async () => 1;

  it("lets a waiting check whose signal is aborted go at once, never running it, and the next in line takes the turn", async () => {
    const attempts = new AttemptsInFlight();
    const ran: string[] = [];
    const first = deferred();
    const a = attempts.run("ip", oneAtATime, async () => {
      ran.push("a");
      await first.promise;
    });
    const caller = new AbortController();
    const b = attempts.run("ip", oneAtATime, async () => void ran.push("b"), caller.signal);
    const c = attempts.run("ip", oneAtATime, async () => void ran.push("c"));
    await turnOfLoop();
    const gone = new Error("the client canceled the call");
    caller.abort(gone);
    // Refused while the check before it still runs: it waits no longer.
    expect(await soon(b)).toBe(gone);
    first.resolve();
    await Promise.all([a, c]);
    expect(ran).toEqual(["a", "c"]);
  });

  it("runs no check whose signal was aborted before it had room", async () => {
    const attempts = new AttemptsInFlight();
    const caller = new AbortController();
    const gone = new Error("gone");
    caller.abort(gone);
    let ran = false;
    const check = attempts.run(
      "ip",
      oneAtATime,
      async () => {
        ran = true;
      },
      caller.signal,
    );
    await expect(check).rejects.toBe(gone);
    expect(ran).toBe(false);
  });
});
