import { render } from "ink-testing-library";
import { describe, expect, it } from "vitest";
import { fitColumns, Table } from "#cli/components/table.js";
import { PIPED_COLUMNS } from "#cli/terminal.js";
import { textWidth } from "#cli/text-width.js";

interface Row {
  id: string;
  plan: string;
}

const columns = [
  { header: "ID", value: (row: Row) => row.id },
  { header: "PLAN", value: (row: Row) => row.plan },
];

describe("fitColumns", () => {
  it("keeps natural widths that fit", () => {
    expect(fitColumns([10, 5, 8], 40)).toEqual([10, 5, 8]);
  });

  it("shrinks the widest columns first and uses the whole width", () => {
    const widths = fitColumns([36, 4, 30], 50) ?? [];
    expect(widths[1]).toBe(4);
    expect(widths.reduce((a, b) => a + b, 0) + 2 * 2).toBe(50);
    expect(Math.abs((widths[0] as number) - (widths[2] as number))).toBeLessThanOrEqual(1);
  });

  it("keeps whole columns whole and shrinks the others around them", () => {
    expect(fitColumns([36, 12, 30], 50, 2, [true, false, false])).toEqual([36, 5, 5]);
  });

  // Regression: past the width, whole columns were kept and the line came out wider than the
  // terminal, which dropped the gaps and wrapped (`teams list` at 40 columns).
  it("finds no widths when the whole columns, the minimum of the others and the gaps do not fit", () => {
    expect(fitColumns([36, 30], 42, 2, [true, false])).toEqual([36, 4]);
    expect(fitColumns([36, 30], 41, 2, [true, false])).toBeUndefined();
    expect(fitColumns([30, 30], 5)).toBeUndefined();
  });
});

describe("Table", () => {
  const rows = [
    { id: "6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10", plan: "professional" },
    { id: "short", plan: "free" },
  ];

  it("prints a header and one line per row, aligned", () => {
    const { lastFrame } = render(<Table columns={columns} rows={rows} empty="none" width={80} />);
    expect(lastFrame()?.split("\n")).toEqual([
      "ID                                    PLAN",
      "6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10  professional",
      "short                                 free",
    ]);
  });

  it("cuts long cells with … to fit the width", () => {
    const { lastFrame } = render(<Table columns={columns} rows={rows} empty="none" width={30} />);
    const lines = lastFrame()?.split("\n") ?? [];
    expect(lines[1]).toBe("6f1c0c1e-8a57-4…  professional");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(30);
  });

  it("never cuts an id the operator copies, shortening the other columns instead", () => {
    const whole = [{ ...columns[0], whole: true }, columns[1]] as typeof columns;
    const { lastFrame } = render(<Table columns={whole} rows={rows} empty="none" width={45} />);
    const lines = lastFrame()?.split("\n") ?? [];
    expect(lines[1]).toBe("6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10  profes…");
  });

  describe("at 40 and 200 columns", () => {
    interface Team {
      id: string;
      name: string;
      plan: string;
      created: string;
    }
    const teams: Team[] = [
      {
        id: "14f50966-74ff-4320-b9eb-7bb54c9228ee",
        name: "A very long team name for narrow terminals",
        plan: "free",
        created: "2026-11-26 12:01:30Z",
      },
      {
        id: "cbe13682-282c-468a-8350-5e2d20b14a08",
        name: "Second",
        plan: "business",
        created: "2026-11-26 12:07:02Z",
      },
    ];
    const teamColumns = [
      { header: "ID", value: (t: Team) => t.id, whole: true },
      { header: "NAME", value: (t: Team) => t.name },
      { header: "PLAN", value: (t: Team) => t.plan },
      { header: "CREATED", value: (t: Team) => t.created },
    ];
    const frame = (width: number) =>
      render(<Table columns={teamColumns} rows={teams} empty="none" width={width} />)
        .lastFrame()
        ?.split("\n") ?? [];

    it("prints a table with every cell whole where the terminal is wide", () => {
      expect(frame(200)).toEqual([
        "ID                                    NAME                                        PLAN      CREATED",
        "14f50966-74ff-4320-b9eb-7bb54c9228ee  A very long team name for narrow terminals  free      2026-11-26 12:01:30Z",
        "cbe13682-282c-468a-8350-5e2d20b14a08  Second                                      business  2026-11-26 12:07:02Z",
      ]);
    });

    it("keeps the gaps between columns while cutting the cells that may be cut", () => {
      const lines = frame(60);
      expect(lines[1]).toBe("14f50966-74ff-4320-b9eb-7bb54c9228ee  A ver…  free    2026-…");
      for (const line of lines) expect(line.length).toBeLessThanOrEqual(60);
    });

    it("prints one block per row, ids whole on their lines, where no table fits", () => {
      const lines = frame(40);
      expect(lines).toEqual([
        "ID: 14f50966-74ff-4320-b9eb-7bb54c9228ee",
        "NAME: A very long team name for narrow",
        "      terminals",
        "PLAN: free",
        "CREATED: 2026-11-26 12:01:30Z",
        "",
        "ID: cbe13682-282c-468a-8350-5e2d20b14a08",
        "NAME: Second",
        "PLAN: business",
        "CREATED: 2026-11-26 12:07:02Z",
      ]);
      for (const line of lines) expect(line.length).toBeLessThanOrEqual(40);
    });
  });

  describe("with wide characters", () => {
    interface Banner {
      id: string;
      name: string;
      plan: string;
    }
    const banners: Banner[] = [
      { id: "0f6a2b1c", name: "日本語のバナー名前", plan: "free" },
      {
        id: "5a147607",
        name: "\u{1f468}\u200d\u{1f469}\u200d\u{1f467} family e\u0301 banner",
        plan: "business",
      },
      { id: "c0ffee00", name: "Plain name", plan: "free" },
    ];
    const bannerColumns = [
      { header: "ID", value: (b: Banner) => b.id, whole: true },
      { header: "NAME", value: (b: Banner) => b.name },
      { header: "PLAN", value: (b: Banner) => b.plan },
    ];
    const frame = (width: number) =>
      render(<Table columns={bannerColumns} rows={banners} empty="none" width={width} />)
        .lastFrame()
        ?.split("\n") ?? [];
    /** The terminal column each line's PLAN cell starts at, and what is just before it. */
    const planCells = (lines: string[]) =>
      lines.map((line, r) => {
        const at = line.lastIndexOf(r === 0 ? "PLAN" : (banners[r - 1] as Banner).plan);
        return { column: textWidth(line.slice(0, at)), before: line.slice(at - 2, at) };
      });

    // Regression: widths counted characters, so a piped `banners list` cut a CJK name
    // (`日本語の…`) although piped output is never cut.
    it("measures cells in terminal columns: a piped table cuts no CJK or emoji cell", () => {
      expect(frame(PIPED_COLUMNS)).toEqual([
        "ID        NAME                PLAN",
        "0f6a2b1c  日本語のバナー名前  free",
        "5a147607  \u{1f468}\u200d\u{1f469}\u200d\u{1f467} family e\u0301 banner  business",
        "c0ffee00  Plain name          free",
      ]);
    });

    // Regression: a cut wide cell took one column of the gap after it.
    it("cuts a wide cell between graphemes to its column, two spaces still before the next", () => {
      for (const width of [30, 29, 28]) {
        const lines = frame(width);
        expect(lines[1]).toMatch(/^0f6a2b1c {2}日本語(の)?…/);
        expect(lines[2]).toContain("\u{1f468}\u200d\u{1f469}\u200d\u{1f467} fam");
        const cells = planCells(lines);
        for (const cell of cells) {
          expect(cell.column).toBe(cells[0]?.column);
          expect(cell.before).toBe("  ");
        }
        for (const line of lines) expect(textWidth(line)).toBeLessThanOrEqual(width);
      }
    });
  });

  it("prints the empty message instead of an empty table", () => {
    const { lastFrame } = render(<Table columns={columns} rows={[]} empty="No teams yet." />);
    expect(lastFrame()).toBe("No teams yet.");
  });
});
