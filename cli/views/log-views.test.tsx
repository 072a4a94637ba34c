import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { render } from "ink-testing-library";
import { describe, expect, it, vi } from "vitest";
import { createExportWriter } from "#cli/commands/log-export-format.js";
import * as table from "#cli/components/table.js";
import { PIPED_COLUMNS } from "#cli/terminal.js";
import { terminalFrame } from "#cli/test-support/terminal-frame.js";
import { textWidth } from "#cli/text-width.js";
import {
  createTailPrinter,
  LogPageView,
  LogStatsView,
  renderTailLine,
} from "#cli/views/log-views.js";
import { ConsentLogEntrySchema } from "#gen/consent/v1/consent_log_pb.js";

const entry = create(ConsentLogEntrySchema, {
  consentLogId: "01a207c9-3f1d-72fd-a6d3-b7ac001777cb",
  bannerId: "f2e7b882-ec0b-4fe5-9786-6b7b47afa71d",
  consentId: "9d1511cb-c2b9-4398-aeac-8bc02d3d5501",
  method: "consent_given",
  preferences: { necessary: true, analytics: true, marketing: false },
  country: "DE",
  receivedAt: timestampFromDate(new Date("2026-05-01T12:00:00.250Z")),
  occurredAt: timestampFromDate(new Date("2026-05-01T11:59:59Z")),
});

describe("LogPageView", () => {
  it("shows a row's time, method, banner, consent id, country and accepted categories, ids whole", () => {
    const frame =
      render(<LogPageView page={{ entries: [entry], nextPageToken: "tok" }} />).lastFrame() ?? "";
    // ink-testing-library's 100 columns hold no table with both ids whole: one block per row.
    expect(frame.split("\n")).toEqual([
      "RECEIVED    2026-05-01 12:00:00Z",
      "METHOD      consent_given",
      "BANNER      f2e7b882-ec0b-4fe5-9786-6b7b47afa71d",
      "CONSENT ID  9d1511cb-c2b9-4398-aeac-8bc02d3d5501",
      "COUNTRY     DE",
      "ACCEPTED    necessary, analytics",
      "more rows: add --page-token tok",
    ]);
  });

  it("leaves the banner out of a page listed for one banner, and fits it as a table", () => {
    const frame =
      render(
        <LogPageView page={{ entries: [entry], nextPageToken: "" }} oneBanner />,
      ).lastFrame() ?? "";
    const [header, row] = frame.split("\n");
    expect(header).toMatch(/^RECEIVED\s+METHOD\s+CONSENT ID\s+COUNTRY\s+ACCEPTED/);
    expect(row).toContain("9d1511cb-c2b9-4398-aeac-8bc02d3d5501");
    expect(frame).not.toContain("f2e7b882");
  });

  it("says how to widen an empty result", () => {
    const frame = render(<LogPageView page={{ entries: [], nextPageToken: "" }} />).lastFrame();
    expect(frame).toContain("No consent log rows match");
  });
});

describe("LogStatsView", () => {
  it("prints totals, the opt-in rate as a percentage, and counts by method and day", () => {
    const stats = {
      total: 4,
      byMethod: { accept_all: 3, consent_default: 1 },
      byDay: [{ day: "2026-05-01", count: 4 }],
      explicitChoices: 3,
      optedIn: 2,
      optInRate: 2 / 3,
    };
    const frame = render(<LogStatsView stats={stats} />).lastFrame() ?? "";
    expect(frame).toMatch(/Opt-in rate\s+66\.7%/);
    expect(frame).toMatch(/accept_all\s+3/);
    expect(frame).toMatch(/2026-05-01\s+4/);
  });

  it("shows no rate when there is no explicit choice", () => {
    const stats = {
      total: 0,
      byMethod: {},
      byDay: [],
      explicitChoices: 0,
      optedIn: 0,
      optInRate: 0,
    };
    const frame = render(<LogStatsView stats={stats} />).lastFrame() ?? "";
    expect(frame).toMatch(/Opt-in rate\s+- \(no choices\)/);
    expect(frame).toContain("No rows in this range.");
  });
});

describe("TailLine", () => {
  const piped = { color: false, columns: PIPED_COLUMNS, oneBanner: false };

  it("aligns the header and rows at fixed widths, without colour when told so", () => {
    const header = renderTailLine(undefined, piped);
    const line = renderTailLine(entry, piped);
    expect(header.indexOf("METHOD")).toBe(line.indexOf("consent_given"));
    expect(header.indexOf("ACCEPTED")).toBe(line.indexOf("necessary, analytics"));
    expect(line).not.toContain("\u001b[");
    expect(line).toContain(entry.consentId);
  });

  // Regression: at 40 columns each tail line was 133 columns, wrapped by the terminal.
  it("prints a row as logs list does on a terminal too narrow for the table", async () => {
    for (const oneBanner of [false, true]) {
      const listed = await terminalFrame(
        <LogPageView page={{ entries: [entry], nextPageToken: "" }} oneBanner={oneBanner} />,
        40,
      );
      const at40 = { color: false, columns: 40, oneBanner };
      expect(renderTailLine(undefined, at40)).toBe("");
      expect(renderTailLine(entry, at40)).toBe(`${listed.join("\n")}\n\n`);
    }
  });

  it("cuts the accepted categories to the terminal's width, as logs list cuts them", () => {
    const many = { ...entry, preferences: { necessary: true, analytics: true, marketing: true } };
    const at = { color: false, columns: 135, oneBanner: false };
    const line = renderTailLine(many, at);
    expect(line).toMatch(/ {2}DE {7}necessary…\n$/);
    expect(textWidth(line.trimEnd())).toBeLessThanOrEqual(135);
    expect(renderTailLine(many, piped)).toContain("necessary, analytics, marketing\n");
  });
});

describe("createTailPrinter", () => {
  const HEADER = /^RECEIVED {2,}METHOD {2,}BANNER/;
  const row = (consentId: string) => ({ ...entry, consentId });

  // Regression: a terminal narrowed from the table to blocks kept the header line printed for
  // the table right above the first block.
  it("prints the header with the first table line, never above a block, and again once widened", () => {
    const print = createTailPrinter({ color: false, oneBanner: false });
    const wide = print(row("wide-1"), 135).split("\n");
    expect(wide[0]).toMatch(HEADER);
    expect(wide[1]).toContain("wide-1");
    expect(print(row("wide-2"), 140)).not.toMatch(HEADER);
    const block = print(row("narrow"), 60);
    expect(block).not.toMatch(HEADER);
    expect(block).toMatch(/^RECEIVED {4}2026-05-01 12:00:00Z\n/);
    const widened = print(row("wide-3"), 135).split("\n");
    expect(widened[0]).toMatch(HEADER);
    expect(widened[1]).toContain("wide-3");
  });

  // Regression: the tail worked out its table's widths again for every line.
  it("works out the table's widths once for each width the terminal takes", () => {
    const streamWidths = vi.spyOn(table, "streamWidths");
    try {
      const print = createTailPrinter({ color: false, oneBanner: false });
      for (const columns of [135, 135, 135, 60, 60, 135]) print(entry, columns);
      expect(streamWidths.mock.calls.map(([, columns]) => columns)).toEqual([135, 60, 135]);
    } finally {
      streamWidths.mockRestore();
    }
  });
});

describe("stored text in a terminal", () => {
  it("shows control characters of a stored row as escapes, in the table and in tail lines", () => {
    const hostile = { ...entry, country: "DE\u001b]0;owned\u0007", consentId: "a\u009b2Jb" };
    const frames = [
      render(<LogPageView page={{ entries: [hostile], nextPageToken: "" }} />).lastFrame() ?? "",
      renderTailLine(hostile, { color: false, columns: PIPED_COLUMNS, oneBanner: false }),
    ];
    for (const frame of frames) {
      expect(frame.replaceAll("\n", "")).not.toMatch(/\p{Cc}/u);
    }
    expect(frames[1]).toContain("DE\\x1b");
    expect(frames[1]).toContain("a\\x9b2Jb");
  });
});

describe("export formats", () => {
  it("writes the CSV header once, with the first batch, and quotes as RFC 4180", () => {
    const writer = createExportWriter("csv");
    const first = writer.batch([entry]).split("\n");
    const second = writer.batch([{ ...entry, country: 'Côte "d"' }]).split("\n");
    expect(first[0]).toMatch(/^consentLogId,/);
    // Times as REST and JSON Lines write them: milliseconds always, a zero fraction too.
    expect(first[1]).toContain(",2026-05-01T12:00:00.250Z,2026-05-01T11:59:59.000Z,false,");
    const [row] = createExportWriter("jsonl").batch([entry]).split("\n");
    expect(JSON.parse(row ?? "")).toMatchObject({
      receivedAt: "2026-05-01T12:00:00.250Z",
      occurredAt: "2026-05-01T11:59:59.000Z",
    });
    expect(second[0]).toContain(',"Côte ""d""",');
    expect(writer.end()).toBe("");
    expect(createExportWriter("csv").end()).toMatch(/^consentLogId,.*,pageUrl,services\n$/);
    expect(createExportWriter("jsonl").end()).toBe("");
  });
});
