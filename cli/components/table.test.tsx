import { render } from "ink-testing-library";
import { describe, expect, it } from "vitest";
import { type Column, fitColumns, SHRUNK_WIDTH, Table } from "#cli/components/table.js";
import { PIPED_COLUMNS } from "#cli/terminal.js";
import { textWidth } from "#cli/text-width.js";

interface Row {
  id: string;
  name: string;
  plan: string;
}

/** A table of `rows` rendered at `width` columns, as its lines. */
function tableLines<R>(columns: readonly Column<R>[], rows: readonly R[], width: number): string[] {
  return (
    render(<Table columns={columns} rows={rows} empty="none" width={width} />)
      .lastFrame()
      ?.split("\n") ?? []
  );
}

const columns = [
  { header: "ID", value: (row: Row) => row.id },
  { header: "NAME", value: (row: Row) => row.name, shrinks: true },
  { header: "PLAN", value: (row: Row) => row.plan },
];

describe("fitColumns", () => {
  it("keeps natural widths that fit", () => {
    expect(fitColumns([10, 5, 8], [4, 4, 4], 40)).toEqual([10, 5, 8]);
  });

  it("shrinks the widest columns first and uses the whole width", () => {
    const widths = fitColumns([36, 4, 30], [4, 4, 4], 50) ?? [];
    expect(widths[1]).toBe(4);
    expect(widths.reduce((a, b) => a + b, 0) + 2 * 2).toBe(50);
    expect(Math.abs((widths[0] as number) - (widths[2] as number))).toBeLessThanOrEqual(1);
  });

  it("keeps each column at least at its minimum and shrinks the others around them", () => {
    expect(fitColumns([36, 12, 30], [36, 12, 10], 64)).toEqual([36, 12, 12]);
    expect(fitColumns([36, 12, 30, 30], [36, 12, 10, 10], 80)).toEqual([36, 12, 13, 13]);
  });

  // Regression: past the width, whole columns were kept and the line came out wider than the
  // terminal, which dropped the gaps and wrapped (`teams list` at 40 columns).
  it("finds no widths when the minimums and the gaps do not fit", () => {
    expect(fitColumns([36, 30], [36, 10], 48)).toEqual([36, 10]);
    expect(fitColumns([36, 30], [36, 10], 47)).toBeUndefined();
    expect(fitColumns([30, 30], [4, 4], 9)).toBeUndefined();
  });
});

describe("Table", () => {
  const rows = [
    { id: "6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10", name: "Acme Consent Ltd", plan: "professional" },
    { id: "short", name: "B", plan: "free" },
  ];
  const frame = (width: number) => tableLines(columns, rows, width);

  it("prints a header and one line per row, aligned", () => {
    expect(frame(80)).toEqual([
      "ID                                    NAME              PLAN",
      "6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10  Acme Consent Ltd  professional",
      "short                                 B                 free",
    ]);
  });

  it("cuts only the columns that shrink, with …, and never an id or a short value", () => {
    const lines = frame(62);
    expect(lines[1]).toBe("6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10  Acme Cons…  professional");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(62);
  });

  // Regression: columns shrank to 4 before blocks were used, so a squeezed table showed
  // `professi…` and `2026-11-…` (`teams list` at 80 columns, `webhooks deliveries` at 120).
  it("prints blocks rather than cut a short value, or a free text column below SHRUNK_WIDTH", () => {
    expect(frame(61)).toEqual([
      "ID    6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10",
      "NAME  Acme Consent Ltd",
      "PLAN  professional",
      "",
      "ID    short",
      "NAME  B",
      "PLAN  free",
    ]);
    expect(SHRUNK_WIDTH).toBe(10);
  });

  it("keeps a header whole: a table whose header would be cut is printed as blocks", () => {
    const headed = [
      columns[0],
      { header: "CROSS-DEVICE CONSENT", value: () => "yes" },
    ] as typeof columns;
    const at = (width: number) => tableLines(headed, rows, width);
    expect(at(58)[0]).toBe("ID                                    CROSS-DEVICE CONSENT");
    expect(at(57)[0]).toBe("ID: 6f1c0c1e-8a57-4d43-9c1b-3f0e2c5b7a10");
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
      { header: "ID", value: (t: Team) => t.id, copy: true },
      { header: "NAME", value: (t: Team) => t.name, shrinks: true },
      { header: "PLAN", value: (t: Team) => t.plan },
      { header: "CREATED", value: (t: Team) => t.created },
    ];
    const frame = (width: number) => tableLines(teamColumns, teams, width);

    it("prints a table with every cell whole where the terminal is wide", () => {
      expect(frame(200)).toEqual([
        "ID                                    NAME                                        PLAN      CREATED",
        "14f50966-74ff-4320-b9eb-7bb54c9228ee  A very long team name for narrow terminals  free      2026-11-26 12:01:30Z",
        "cbe13682-282c-468a-8350-5e2d20b14a08  Second                                      business  2026-11-26 12:07:02Z",
      ]);
    });

    it("keeps the gaps between columns while cutting the cells that may be cut", () => {
      const lines = frame(80);
      expect(lines[1]).toBe(
        "14f50966-74ff-4320-b9eb-7bb54c9228ee  A very lo…  free      2026-11-26 12:01:30Z",
      );
      for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
    });

    it("prints blocks one column short of that, rather than cut the plan or the time", () => {
      expect(frame(79).slice(0, 5)).toEqual([
        "ID       14f50966-74ff-4320-b9eb-7bb54c9228ee",
        "NAME     A very long team name for narrow terminals",
        "PLAN     free",
        "CREATED  2026-11-26 12:01:30Z",
        "",
      ]);
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
      { header: "ID", value: (b: Banner) => b.id, copy: true },
      { header: "NAME", value: (b: Banner) => b.name, shrinks: true },
      { header: "PLAN", value: (b: Banner) => b.plan },
    ];
    const frame = (width: number) => tableLines(bannerColumns, banners, width);
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
      for (const width of [32, 31, 30]) {
        const lines = frame(width);
        expect(lines[1]).toMatch(/^0f6a2b1c {2}日本語[^ ]*…/);
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
