import { failures, type RunResult } from "./load.js";
import type { Scenario } from "./scenarios.js";

/** One target of one scenario, judged. */
export interface Verdict {
  scenario: string;
  /** "control", another scenario's name, or "p99". */
  against: string;
  requestsPerSecond: number | undefined;
  p99Ms: number | undefined;
  baselineRequestsPerSecond?: number;
  baselineP99Ms?: number;
  ratio?: number;
  /** e.g. "≥ 0.50" or "p99 ≤ 10 ms"; "-" when the figure is reported but not judged. */
  target: string;
  /** PASS / FAIL; "info" without a target; INVALID when a request of either side failed. */
  result: "PASS" | "FAIL" | "info" | "INVALID" | "not run";
  /** Other work used the machine during a run this verdict rests on. */
  disturbed: boolean;
}

/** A run during which other processes used more than a tenth of the machine. */
export function disturbed(run: RunResult | undefined): boolean {
  return (run?.otherBusy ?? 0) > 0.1;
}

function runOf(runs: RunResult[], scenario: string, side?: RunResult["side"]) {
  return runs.find(
    (run) => run.scenario === scenario && (side ? run.side === side : run.side !== "control"),
  );
}

/** Judges every target of every scenario that ran. */
export function judge(scenarios: Scenario[], runs: RunResult[]): Verdict[] {
  const verdicts: Verdict[] = [];
  for (const scenario of scenarios) {
    const run = runOf(runs, scenario.name);
    for (const target of scenario.targets) {
      const base = {
        scenario: scenario.name,
        requestsPerSecond: run?.requestsPerSecond,
        p99Ms: run?.latencyMs.p99,
      };
      if (target.kind === "p99") {
        const result = !run
          ? "not run"
          : failures(run) > 0
            ? "INVALID"
            : run.latencyMs.p99 <= target.maxMs
              ? "PASS"
              : "FAIL";
        verdicts.push({
          ...base,
          against: "p99",
          target: `p99 ≤ ${target.maxMs} ms`,
          result,
          disturbed: disturbed(run),
        });
        continue;
      }
      const against = target.kind === "control" ? "control" : target.scenario;
      const baseline =
        target.kind === "control"
          ? runOf(runs, scenario.name, "control")
          : runOf(runs, target.scenario);
      const ratio =
        run && baseline ? run.requestsPerSecond / baseline.requestsPerSecond : undefined;
      const minRatio = target.minRatio;
      let result: Verdict["result"] = "not run";
      if (run && baseline && ratio !== undefined) {
        if (failures(run) + failures(baseline) > 0) result = "INVALID";
        else if (minRatio === undefined) result = "info";
        else result = ratio >= minRatio ? "PASS" : "FAIL";
      }
      verdicts.push({
        ...base,
        against,
        baselineRequestsPerSecond: baseline?.requestsPerSecond,
        baselineP99Ms: baseline?.latencyMs.p99,
        ratio,
        target: minRatio === undefined ? "-" : `≥ ${minRatio.toFixed(2)}`,
        result,
        disturbed: disturbed(run) || disturbed(baseline),
      });
    }
  }
  return verdicts;
}

const number = (value: number | undefined, digits = 0) =>
  value === undefined
    ? "-"
    : value.toLocaleString("en-US", {
        maximumFractionDigits: digits,
        minimumFractionDigits: digits,
      });

/** A plain-text table with right-aligned figures. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((cell, i) =>
    Math.max(cell.length, ...rows.map((row) => (row[i] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
      .join("  ");
  return [
    line(header),
    widths.map((width) => "-".repeat(width)).join("  "),
    ...rows.map(line),
  ].join("\n");
}

/** Every run: requests/s, latency and failures, service and control alike. */
export function runsTable(runs: RunResult[]): string {
  return table(
    [
      "scenario",
      "side",
      "req/s",
      "p50 ms",
      "p99 ms",
      "max ms",
      "requests",
      "failed",
      "bytes/resp",
      "CPU µs/req",
      "machine busy",
      "others",
    ],
    runs.map((run) => [
      run.scenario,
      run.side,
      number(run.requestsPerSecond),
      number(run.latencyMs.p50),
      number(run.latencyMs.p99),
      number(run.latencyMs.max),
      number(run.requests),
      number(failures(run)),
      number(run.bytesPerResponse),
      number(run.cpuMicrosPerRequest),
      `${number(run.machineBusy * 100)}%`,
      `${number((run.otherBusy ?? 0) * 100)}%${disturbed(run) ? "*" : ""}`,
    ]),
  );
}

/** The targets: each scenario beside its baseline, with the ratio and the verdict. */
export function verdictTable(verdicts: Verdict[]): string {
  return table(
    ["scenario", "req/s", "p99 ms", "vs", "req/s", "p99 ms", "ratio", "target", "result"],
    verdicts.map((verdict) => [
      verdict.scenario,
      number(verdict.requestsPerSecond),
      number(verdict.p99Ms),
      verdict.against,
      number(verdict.baselineRequestsPerSecond),
      number(verdict.baselineP99Ms),
      number(verdict.ratio, 2),
      verdict.target,
      `${verdict.result}${verdict.disturbed ? "*" : ""}`,
    ]),
  );
}

/** For each tailed scenario: whether its tail received every acknowledged choice, once. */
export function tailLines(runs: RunResult[]): string[] {
  return runs.flatMap((run) => {
    const tail = run.tail;
    if (!tail) return [];
    return [
      `${run.scenario}: the tail received ${number(tail.rows)} rows for ${number(tail.expected)} acknowledged choices ` +
        `(requests in flight when the load stopped are recorded but not counted), ${number(tail.repeated)} more than once`,
    ];
  });
}

/** For each webhook scenario: whether every acknowledged choice reached the receiver, verified. */
export function webhookLines(runs: RunResult[]): string[] {
  return runs.flatMap((run) => {
    const drain = run.webhooks;
    if (!drain) return [];
    return [
      `${run.scenario}: ${number(drain.events)} of ${number(drain.expected)} acknowledged choices delivered ` +
        `(${number(drain.verified)} deliveries verified, ${number(drain.rejected)} rejected); ` +
        `${number(drain.eventsAtRunEnd)} had arrived when the run ended, the last ${number(drain.trailingSeconds, 1)} s after it`,
    ];
  });
}
