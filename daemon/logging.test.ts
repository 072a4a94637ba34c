import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { repeatedFailureLog, serviceLoggers, withoutPreferencesTokens } from "#daemon/logging.js";

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

describe("withoutPreferencesTokens", () => {
  it("hides the token of a preferences link however its name is written: any case, any letter percent-encoded in either case", () => {
    const token = "AlaXTDbbC2W4DA9eENJLcCBpPfV9QNz8iUlEzZ41N8IZaww_9w.V-X0KZfj9mO2txgLDPZSEQ";
    const names = [
      "preferences",
      "Preferences",
      "PREFERENCES",
      "%70references",
      "%50references",
      "pr%45ferences",
      "pr%65ferences",
      "PR%65FERENCES",
      "%70%72%65%66%65%72%65%6E%63%65%73",
      "%50%52%45%46%45%52%45%4e%43%45%53",
    ];
    for (const name of names) {
      const line = `{"msg":"GET /${name}/${token}?saved=1 took long"}`;
      expect(withoutPreferencesTokens(line)).toBe(
        `{"msg":"GET /${name}/[redacted]?saved=1 took long"}`,
      );
    }
    // Another path keeps its text.
    const other = `{"msg":"GET /loader/${token}.js"}`;
    expect(withoutPreferencesTokens(other)).toBe(other);
  });
});

describe("an error in a log line", () => {
  it("is typed by the name the error gives itself, as a bundle that renamed its class would not show", () => {
    const lines: Record<string, { type: string; message: string }>[] = [];
    const destination = new Writable({
      write(chunk, _, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    });
    const { daemon } = serviceLoggers("info", destination);
    // As the service's bundle leaves a class of the MongoDB driver whose name another took.
    class MongoServerError5 extends Error {
      override get name() {
        return "MongoServerError";
      }
    }
    class Refused extends Error {}
    daemon.error({ err: new MongoServerError5("not primary") }, "store failed");
    daemon.error({ err: new Refused("no") }, "refused");
    daemon.error({ err: new TypeError("bad") }, "typed");
    expect(lines.map((line) => [line.err?.type, line.err?.message])).toEqual([
      ["MongoServerError", "not primary"],
      ["Refused", "no"],
      ["TypeError", "bad"],
    ]);
  });
});
