import { describe, expect, it } from "vitest";
import { repeatedFailureLog } from "#daemon/logging.js";

describe("repeatedFailureLog", () => {
  it("logs a failure once while it repeats, and another failure at once", () => {
    const lines: { details: Record<string, unknown>; message: string }[] = [];
    const logger = {
      error: () => {},
      warn: (details: object, message: string) =>
        lines.push({ details: details as Record<string, unknown>, message }),
    };
    const log = repeatedFailureLog(logger, "webhook dispatch pass failed", {
      level: "warn",
      byWords: true,
    });
    for (let i = 0; i < 5; i++) log(new Error("connection refused"));
    expect(lines).toHaveLength(1);
    // A new fault is not hidden behind the one before.
    log(new Error("disk I/O error"));
    expect(lines.map((line) => line.details.err)).toEqual([
      new Error("connection refused"),
      new Error("disk I/O error"),
    ]);
    expect(lines[1]?.details.failedSincePreviousLine).toBe(4);

    // Without byWords, every failure is the one state's, whatever its words.
    const outage: unknown[] = [];
    const state = repeatedFailureLog({ ...logger, warn: (d) => outage.push(d) }, "down");
    state(new Error("connection refused"));
    state(new Error("timed out"));
    expect(outage).toHaveLength(1);
  });
});
