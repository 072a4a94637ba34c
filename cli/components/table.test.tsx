import { render } from "ink-testing-library";
import { describe, expect, it } from "vitest";
import { fitColumns, Table } from "#cli/components/table.js";

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
    const widths = fitColumns([36, 4, 30], 50);
    expect(widths[1]).toBe(4);
    expect(widths.reduce((a, b) => a + b, 0) + 2 * 2).toBe(50);
    expect(Math.abs((widths[0] as number) - (widths[2] as number))).toBeLessThanOrEqual(1);
  });

  it("keeps whole columns whole and shrinks the others around them", () => {
    expect(fitColumns([36, 12, 30], 50, 2, [true, false, false])).toEqual([36, 5, 5]);
    // Even past the width: an id that is cut cannot be copied.
    expect(fitColumns([36, 30], 30, 2, [true, false])).toEqual([36, 4]);
  });

  it("never goes below a minimum width", () => {
    expect(fitColumns([30, 30], 5).every((width) => width >= 4)).toBe(true);
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

  it("prints the empty message instead of an empty table", () => {
    const { lastFrame } = render(<Table columns={columns} rows={[]} empty="No teams yet." />);
    expect(lastFrame()).toBe("No teams yet.");
  });
});
