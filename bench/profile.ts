import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { REPO_ROOT } from "./service.js";

/**
 * Summarises the V8 CPU profiles that `npm run bench -- --profile` has the service write
 * (`node --cpu-prof`): where the busy time goes, by package and by function, self and inclusive.
 * Also runs alone: `node --import tsx bench/profile.ts <profile file or directory>`.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  /** Microseconds on the monotonic clock that process.hrtime reads too. */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A span of the monotonic clock in microseconds, e.g. one measured load run. */
export interface Window {
  startUs: number;
  endUs: number;
}

/** Now on the clock V8 stamps profile samples with. */
export function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** V8's pseudo-frames that are not work of the program. */
const IDLE = new Set(["(idle)", "(root)"]);

/** A short, stable place for a frame: repo-relative path, or the package inside node_modules. */
function placeOf(url: string): string {
  if (!url) return "";
  const file = url.startsWith("file://") ? fileURLToPath(url) : url;
  const inModules = file.lastIndexOf("node_modules/");
  if (inModules >= 0) return file.slice(inModules + "node_modules/".length);
  return file.startsWith(REPO_ROOT) ? file.slice(REPO_ROOT.length) : file;
}

/** What a frame belongs to: a package, a folder of this project, node internals or V8 itself. */
function areaOf(frame: CallFrame): string {
  const place = placeOf(frame.url);
  if (!place) return frame.functionName.startsWith("(") ? frame.functionName : "(native)";
  // node:internal/abort_controller → "node abort_controller": fine enough to name the culprit.
  if (place.startsWith("node:")) return `node ${place.replace(/^node:(internal\/)?/, "")}`;
  if (frame.url.includes("node_modules/")) {
    const [scope = "", name = ""] = place.split("/");
    return scope.startsWith("@") ? `${scope}/${name}` : scope;
  }
  return `project ${place.split("/").slice(0, 2).join("/")}`;
}

function frameName(frame: CallFrame): string {
  const place = placeOf(frame.url);
  const name = frame.functionName || "(anonymous)";
  return place ? `${name}  ${place}:${frame.lineNumber + 1}` : name;
}

export interface ProfileSummary {
  file: string;
  /** Sampled time that was not idle, in ms. */
  busyMs: number;
  /** busyMs over the window's length: how saturated the thread was (1 = a whole core). */
  utilisation?: number;
  byArea: { name: string; ms: number; share: number }[];
  selfTop: { name: string; ms: number; share: number }[];
  inclusiveTop: { name: string; ms: number; share: number }[];
}

function top(times: Map<string, number>, busy: number, count: number) {
  return [...times]
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([name, us]) => ({ name, ms: us / 1000, share: us / busy }));
}

const add = (map: Map<string, number>, key: string, us: number) =>
  map.set(key, (map.get(key) ?? 0) + us);

/** Summarises the samples of `profile`, only those inside `window` when one is given. */
export function summarise(
  file: string,
  profile: CpuProfile,
  options: { window?: Window; count?: number } = {},
): ProfileSummary {
  const { window, count = 25 } = options;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parents.set(child, node.id);
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (window && (at < window.startUs || at > window.endUs)) return;
    selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
  });

  let busy = 0;
  const byArea = new Map<string, number>();
  const bySelf = new Map<string, number>();
  const byInclusive = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = nodes.get(id);
    if (!node || IDLE.has(node.callFrame.functionName)) continue;
    busy += us;
    add(byArea, areaOf(node.callFrame), us);
    add(bySelf, frameName(node.callFrame), us);
    // Each function once per stack, so recursion is not counted twice.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
      const frame = nodes.get(at)?.callFrame;
      if (!frame || frame.functionName === "(root)") continue;
      const name = frameName(frame);
      if (!seen.has(name)) add(byInclusive, name, us);
      seen.add(name);
    }
  }
  return {
    file,
    busyMs: busy / 1000,
    utilisation: window ? busy / (window.endUs - window.startUs) : undefined,
    byArea: top(byArea, busy, count),
    selfTop: top(bySelf, busy, count),
    inclusiveTop: top(byInclusive, busy, count),
  };
}

/** Every .cpuprofile under `target` (a file or a directory tree). */
export async function profileFiles(target: string): Promise<string[]> {
  if (target.endsWith(".cpuprofile")) return [target];
  const entries = await readdir(target, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(".cpuprofile"))
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
}

/** Summaries of every profile under `target`, busiest first. */
export async function summariseProfiles(
  target: string,
  options: { window?: Window; count?: number } = {},
): Promise<ProfileSummary[]> {
  const files = await profileFiles(target);
  const summaries = await Promise.all(
    files.map(async (file) => summarise(file, JSON.parse(await readFile(file, "utf8")), options)),
  );
  return summaries.sort((a, b) => b.busyMs - a.busyMs);
}

export function renderSummary(summary: ProfileSummary): string {
  const rows = (list: ProfileSummary["byArea"]) =>
    list.map(
      (row) =>
        `  ${(row.share * 100).toFixed(1).padStart(5)}%  ${row.ms.toFixed(0).padStart(7)} ms  ${row.name}`,
    );
  return [
    `${path.relative(REPO_ROOT, summary.file)}: ${summary.busyMs.toFixed(0)} ms busy${
      summary.utilisation === undefined
        ? ""
        : ` (${(summary.utilisation * 100).toFixed(0)}% of one core)`
    }`,
    "By area (self time):",
    ...rows(summary.byArea.slice(0, 15)),
    "Top functions, self time:",
    ...rows(summary.selfTop),
    "Top functions, inclusive time:",
    ...rows(summary.inclusiveTop),
  ].join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [target = "bench/results/profiles", count = "25"] = process.argv.slice(2);
  for (const summary of await summariseProfiles(target, { count: Number(count) })) {
    process.stdout.write(`${renderSummary(summary)}\n\n`);
  }
}
