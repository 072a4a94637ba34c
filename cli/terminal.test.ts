import { describe, expect, it } from "vitest";
import { colorEnabled, frameColumns, liveTerminal, PIPED_COLUMNS } from "#cli/terminal.js";

describe("colorEnabled", () => {
  it("colours a terminal only, and never with NO_COLOR or TERM=dumb", () => {
    expect(colorEnabled({ isTTY: true }, {})).toBe(true);
    expect(colorEnabled({ isTTY: false }, {})).toBe(false);
    expect(colorEnabled({}, {})).toBe(false);
    expect(colorEnabled({ isTTY: true }, { NO_COLOR: "1" })).toBe(false);
    expect(colorEnabled({ isTTY: true }, { NO_COLOR: "" })).toBe(true);
    expect(colorEnabled({ isTTY: true }, { TERM: "dumb" })).toBe(false);
  });
});

describe("liveTerminal", () => {
  it("animates a terminal only: never piped, with TERM=dumb or in CI", () => {
    expect(liveTerminal({ isTTY: true }, {})).toBe(true);
    expect(liveTerminal({ isTTY: true }, { TERM: "xterm-256color", NO_COLOR: "1" })).toBe(true);
    expect(liveTerminal({ isTTY: false }, {})).toBe(false);
    expect(liveTerminal({}, {})).toBe(false);
    expect(liveTerminal({ isTTY: true }, { TERM: "dumb" })).toBe(false);
    expect(liveTerminal({ isTTY: true }, { CI: "true" })).toBe(false);
    expect(liveTerminal({ isTTY: true }, { CI: "" })).toBe(false);
    expect(liveTerminal({ isTTY: true }, { CONTINUOUS_INTEGRATION: "1" })).toBe(false);
    expect(liveTerminal({ isTTY: true }, { CI: "false" })).toBe(true);
    expect(liveTerminal({ isTTY: true }, { CI: "0" })).toBe(true);
  });
});

describe("frameColumns", () => {
  it("fits a terminal (dumb or not) and never cuts piped output", () => {
    expect(frameColumns({ isTTY: true, columns: 120 })).toBe(120);
    expect(frameColumns({ isTTY: true })).toBe(80);
    expect(frameColumns({ isTTY: false, columns: 120 })).toBe(PIPED_COLUMNS);
    expect(frameColumns({})).toBe(PIPED_COLUMNS);
  });
});
