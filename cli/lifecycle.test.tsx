import { stripVTControlCharacters } from "node:util";
import { create } from "@bufbuild/protobuf";
import { Box, Text } from "ink";
import { describe, expect, it, vi } from "vitest";
import { CopyableAfter } from "#cli/components/copyable.js";
import { renderCommand } from "#cli/lifecycle.js";
import { PIPED_COLUMNS, useColumns } from "#cli/terminal.js";
import { MemoryStream } from "#cli/test-support/memory-io.js";
import { textWidth } from "#cli/text-width.js";
import { BannersTable, BannerView } from "#cli/views/banner-views.js";
import { BannerSchema } from "#gen/consent/v1/banner_pb.js";

// Ink writes only the final frame when it detects CI (is-in-ci, read when Ink loads); these tests
// look at the frames an operator's terminal shows, so they run as outside CI wherever they run.
vi.hoisted(() => {
  process.env.CI = "false";
  delete process.env.CONTINUOUS_INTEGRATION;
});

const later = <T,>(value: T, ms = 200) =>
  new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

const occurrences = (text: string, part: string) => text.split(part).length - 1;

/** What is left on the screen after the spinner's last frame, control sequences taken out. */
const afterSpinner = (text: string, label: string) =>
  stripVTControlCharacters(text.slice(text.lastIndexOf(`${label}\n`) + label.length + 1));

/** Renders nothing; notes the width the frame is laid out at, each time it is rendered. */
function ColumnsSeen({ seen }: { seen: number[] }) {
  seen.push(useColumns());
  return null;
}

describe("renderCommand", () => {
  const streams = (stdout = new MemoryStream()) => ({
    stdout: stdout as unknown as NodeJS.WriteStream,
    stderr: new MemoryStream() as unknown as NodeJS.WriteStream,
    color: false,
    // vitest's console has no Console constructor for Ink to patch.
    patchConsole: false,
  });
  /** A terminal `rows` lines tall that keeps what is written to it. */
  const terminal = (rows: number, columns = 100) =>
    Object.assign(new MemoryStream(), { isTTY: true, rows, columns }) as unknown as MemoryStream;
  const written = (options: { stdout: NodeJS.WriteStream }) =>
    (options.stdout as unknown as MemoryStream).text;

  it("exits after the final frame with the view's exit code", async () => {
    const options = streams();
    const outcome = await renderCommand(
      {
        task: () => Promise.resolve(3),
        progress: "Checking…",
        view: (n) => <Text>{n} checks failed</Text>,
        exitCode: (n) => (n > 0 ? 1 : 0),
      },
      options,
    );
    expect(outcome).toEqual({ ok: true, exitCode: 1 });
    expect(written(options)).toContain("3 checks failed");
  });

  it("hands a failure back instead of printing it", async () => {
    const options = streams();
    const failure = new Error("daemon said no");
    const outcome = await renderCommand(
      { task: () => Promise.reject(failure), progress: "Working…", view: () => null },
      options,
    );
    expect(outcome).toEqual({ ok: false, error: failure });
    expect(written(options)).not.toContain("daemon said no");
  });

  it("writes the result as a single frame without a spinner or erase sequences when not live", async () => {
    const options = streams();
    const outcome = await renderCommand(
      {
        task: () => later("ok"),
        progress: "Working…",
        view: (value) => <Text>result: {value}</Text>,
      },
      options,
    );
    expect(outcome).toEqual({ ok: true, exitCode: 0 });
    expect(written(options)).toBe("result: ok\n");
  });

  // Regression: piped, the frame was laid out at PIPED_COLUMNS, and Ink drew it on a grid of
  // 10,000 cells a line: `logs list --limit 1000 > file` took seconds and gigabytes.
  it("lays a piped frame out at the width of its widest line, writing what it wrote at PIPED_COLUMNS", async () => {
    const banner = (i: number) =>
      create(BannerSchema, {
        id: `0f6a2b1c-9d8e-4f70-8a1b-2c3d4e5f${String(i).padStart(4, "0")}`,
        publicId: `5a147607-8673-4f5b-8305-71ebc1b3${String(i).padStart(4, "0")}`,
        name: i % 3 === 0 ? "日本語のバナー名前 with a longer name" : `Shop ${i}`,
        domain: "https://shop.example.com",
      });
    const banners = Array.from({ length: 40 }, (_, i) => banner(i));
    const columnsSeen: number[] = [];
    // `banners list`, then `banners get` with its loader snippet (a line that is never cut), then
    // a list's pointer to its next page.
    const view = () => (
      <Box flexDirection="column">
        <BannersTable banners={banners} />
        <BannerView banner={banner(0)} baseUrl={`https://cdn.example.com/${"x".repeat(90)}`} />
        <CopyableAfter text="more rows: add --page-token" value={"t".repeat(60)} />
        <ColumnsSeen seen={columnsSeen} />
      </Box>
    );
    const piped = streams();
    await renderCommand({ task: async () => banners, progress: "", view }, piped);
    const lines = written(piped).replace(/\n$/, "").split("\n");
    expect(columnsSeen.at(-1)).toBe(Math.max(...lines.map(textWidth)));
    // What a terminal PIPED_COLUMNS wide is given: the frame laid out at that width, as piped
    // output was.
    const wide = streams(terminal(24, PIPED_COLUMNS));
    await renderCommand({ task: async () => banners, progress: "", view }, wide);
    expect(columnsSeen.at(-1)).toBe(PIPED_COLUMNS);
    expect(written(piped)).toBe(written(wide));
  });

  it("on a live terminal, erases the spinner and writes a frame taller than the terminal once, never clearing the screen", async () => {
    const options = { ...streams(terminal(3)), live: true };
    const lines = ["ID", "one", "two", "three", "four", "five"];
    const outcome = await renderCommand(
      {
        task: () => later(lines),
        progress: "Listing…",
        view: (rows) => <Text>{rows.join("\n")}</Text>,
      },
      options,
    );
    expect(outcome).toEqual({ ok: true, exitCode: 0 });
    const text = written(options);
    expect(text).toContain("Listing…");
    expect(text).not.toContain("\x1b[2J");
    expect(text).not.toContain("\x1b[3J");
    expect(occurrences(text, "three")).toBe(1);
    // Written last and as it is, right after the spinner's erase (no blank line in between).
    expect(text.endsWith(`${lines.join("\n")}\n`)).toBe(true);
    expect(afterSpinner(text, "Listing…")).toBe(`${lines.join("\n")}\n`);
  });

  it("on a live terminal, fits the final frame to the terminal's width", async () => {
    const options = { ...streams(terminal(24, 10)), live: true };
    await renderCommand(
      { task: () => later("aaaa bbbb cccc", 0), progress: "…", view: (s) => <Text>{s}</Text> },
      options,
    );
    expect(written(options).endsWith("aaaa bbbb\ncccc\n")).toBe(true);
  });

  it("on a live terminal, leaves nothing behind when the task fails", async () => {
    const options = { ...streams(terminal(24)), live: true };
    const failure = new Error("daemon said no");
    const outcome = await renderCommand(
      {
        task: () => later(0).then(() => Promise.reject(failure)),
        progress: "Working…",
        view: () => null,
      },
      options,
    );
    expect(outcome).toEqual({ ok: false, error: failure });
    const text = written(options);
    expect(text).toContain("Working…");
    // The spinner's line is erased and the cursor shown again; no blank line is left.
    expect(text.endsWith("\x1b[?25h")).toBe(true);
    expect(afterSpinner(text, "Working…")).toBe("");
  });
});
