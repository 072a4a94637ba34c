import { describe, expect, it } from "vitest";
import { oneAtATimePerKey } from "#daemon/one-at-a-time.js";

/** A task its test settles by hand, recording when it started. */
function heldTask(started: string[], name: string) {
  let release = () => {};
  let fail = () => {};
  const held = new Promise<string>((resolve, reject) => {
    release = () => resolve(name);
    fail = () => reject(new Error(name));
  });
  const task = () => {
    started.push(name);
    return held;
  };
  return { task, release, fail };
}

/** Lets every task whose turn has come start (promise callbacks only; no timers). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("oneAtATimePerKey (a team's banner lists)", () => {
  it("starts a key's next task only once the one before has settled", async () => {
    const oneAtATime = oneAtATimePerKey();
    const started: string[] = [];
    const first = heldTask(started, "first");
    const second = heldTask(started, "second");
    const third = heldTask(started, "third");
    const results = [first, second, third].map((held) => oneAtATime("team-a", held.task));
    await settle();
    expect(started).toEqual(["first"]);
    first.release();
    await settle();
    expect(started).toEqual(["first", "second"]);
    second.release();
    third.release();
    expect(await Promise.all(results)).toEqual(["first", "second", "third"]);
  });

  it("does not hold another key's task behind a running one", async () => {
    const oneAtATime = oneAtATimePerKey();
    const started: string[] = [];
    const slow = heldTask(started, "slow");
    const other = heldTask(started, "other team");
    const running = [oneAtATime("team-a", slow.task), oneAtATime("team-b", other.task)];
    await settle();
    expect(started).toEqual(["slow", "other team"]);
    other.release();
    slow.release();
    expect(await Promise.all(running)).toEqual(["slow", "other team"]);
  });

  it("runs the next task after a failed one, the failure told to its own caller alone", async () => {
    const oneAtATime = oneAtATimePerKey();
    const started: string[] = [];
    const failing = heldTask(started, "failing");
    const failed = oneAtATime("team-a", failing.task);
    const next = oneAtATime("team-a", async () => "next");
    failing.fail();
    await expect(failed).rejects.toThrow("failing");
    expect(await next).toBe("next");
    // The key was forgotten once idle: a later task starts at once.
    expect(await oneAtATime("team-a", async () => "later")).toBe("later");
  });
});
