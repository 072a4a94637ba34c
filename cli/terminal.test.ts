import { describe, expect, it } from "vitest";
import { colorEnabled, PIPED_COLUMNS, pipedStream } from "#cli/terminal.js";
import { MemoryStream } from "#cli/test-support/memory-io.js";

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

describe("pipedStream", () => {
  it("forwards writes and reports a width that never cuts a line", async () => {
    const target = new MemoryStream();
    const stream = pipedStream(target);
    expect(stream.columns).toBe(PIPED_COLUMNS);
    expect(stream.isTTY).toBe(false);
    await new Promise<void>((resolve) => stream.write("one line\n", () => resolve()));
    expect(target.text).toBe("one line\n");
  });
});
