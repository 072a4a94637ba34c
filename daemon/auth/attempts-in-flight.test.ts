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

/** A check that notes its start in `ran` and runs until `until` settles. */
function holding(ran: string[], name: string, until: Promise<void>) {
  return async () => {
    ran.push(name);
    await until;
  };
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
    const a = attempts.run("ip", oneAtATime, holding(ran, "a", first.promise));
    const caller = new AbortController();
    const b = attempts.run(
      "ip",
      oneAtATime,
      async () => void ran.push("b"),
      () => caller.signal,
    );
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

  it("queues no check whose signal was aborted before it would wait, and reads no signal of one with room", async () => {
    const attempts = new AttemptsInFlight();
    const ran: string[] = [];
    const first = deferred();
    let read = 0;
    const a = attempts.run("ip", oneAtATime, holding(ran, "a", first.promise), () => {
      read += 1;
      return new AbortController().signal;
    });
    const caller = new AbortController();
    const gone = new Error("gone");
    caller.abort(gone);
    const b = attempts.run(
      "ip",
      oneAtATime,
      async () => void ran.push("b"),
      () => caller.signal,
    );
    await expect(b).rejects.toBe(gone);
    first.resolve();
    await a;
    expect([ran, read]).toEqual([["a"], 0]);
  });

  it("keeps a woken check first in line when a check come meanwhile took the room", async () => {
    const attempts = new AttemptsInFlight();
    const ran: string[] = [];
    const first = deferred();
    const later = deferred();
    const a = attempts.run("ip", oneAtATime, holding(ran, "a", first.promise));
    // Its room is asked slowly once woken, so a check sent meanwhile is let on before it.
    let asked = 0;
    const slowOnceWoken = async () => {
      if (asked++ > 0) for (let i = 0; i < 3; i++) await turnOfLoop();
      return 1;
    };
    const b = attempts.run("ip", slowOnceWoken, async () => void ran.push("b"));
    const d = attempts.run("ip", oneAtATime, async () => void ran.push("d"));
    await turnOfLoop();
    first.resolve();
    await a;
    const c = attempts.run("ip", oneAtATime, holding(ran, "c", later.promise));
    for (let i = 0; i < 6; i++) await turnOfLoop();
    later.resolve();
    await Promise.all([b, c, d]);
    expect(ran).toEqual(["a", "c", "b", "d"]);
  });

  it("lets on as many waiting checks as the room has grown to, not one at a time", async () => {
    const attempts = new AttemptsInFlight();
    let room = 1;
    const roomNow = async () => room;
    const started: string[] = [];
    const first = deferred();
    const second = deferred();
    const a = attempts.run("ip", roomNow, holding(started, "a", first.promise));
    const b = attempts.run("ip", roomNow, holding(started, "b", second.promise));
    const c = attempts.run("ip", roomNow, async () => void started.push("c"));
    await turnOfLoop();
    // The limit's window began anew: room for three.
    room = 3;
    first.resolve();
    await a;
    // c runs beside b, not once b has ended.
    expect(await soon(c)).toBe("ran");
    expect(started).toEqual(["a", "b", "c"]);
    second.resolve();
    await b;
  });
});
