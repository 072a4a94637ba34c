import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdirSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { createConnection, createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** How the service runs: `npm start`'s one process, or consentd and consent-gateway apart. */
export type Topology = "single" | "split";

/** The processes of each topology, by name (a profile directory is named after its process). */
export const PROCESSES: Record<Topology, string[]> = {
  single: ["consent"],
  split: ["consentd", "consent-gateway"],
};

/** A service (or control server) running in child processes of the benchmark. */
export interface RunningService {
  topology: Topology;
  /** REST gateway, e.g. http://127.0.0.1:41234 */
  gatewayUrl: string;
  /** Connect/gRPC daemon. */
  daemonUrl: string;
  /** Process ids, so a reader of the log can find them. */
  pids: number[];
  stop(): Promise<void>;
}

export interface StartOptions {
  dataDir: string;
  /** Extra environment (CONSENT_TRUST_PROXY, ...) for every process of the topology. */
  env: Record<string, string>;
  /** Service output goes here, so a failed start can be explained. */
  logFile: string;
  /** When set, each process runs under `node --cpu-prof` and writes its profile here on exit. */
  profileDir?: string;
}

/** A port free right now on 127.0.0.1 (the service is then started on it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== "object" || !address) throw new Error("no free port");
  return address.port;
}

/**
 * Starts a Node program of this package as a child process. It is killed by pid if the benchmark
 * itself dies, so an aborted run leaves nothing behind. The log file's folder is made when it is
 * missing (`bench/results/` is not in a fresh clone).
 */
export function startProcess(
  name: string,
  args: string[],
  options: { env: Record<string, string>; logFile: string; profileDir?: string },
): ChildProcess {
  const profile = options.profileDir
    ? ["--cpu-prof", `--cpu-prof-dir=${path.join(options.profileDir, name)}`]
    : [];
  mkdirSync(path.dirname(options.logFile), { recursive: true });
  const child = spawn(process.execPath, [...profile, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = createWriteStream(options.logFile, { flags: "a" });
  log.write(`--- ${name} (pid ${child.pid}): node ${args.join(" ")}\n`);
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  child.once("exit", () => process.removeListener("exit", killOnExit));
  return child;
}

/** SIGTERM (the service drains and exits), then SIGKILL if it has not gone after `graceMs`. */
export async function stopProcess(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Resolves once `probe` succeeds; fails early when one of `children` exits first. */
export async function waitUntil(
  what: string,
  probe: () => Promise<boolean>,
  children: ChildProcess[],
  logFile: string,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const dead = children.find((child) => child.exitCode !== null || child.signalCode !== null);
    if (dead) throw new Error(`${what}: a process exited early; see ${await tail(logFile)}`);
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${what}: not ready after ${timeoutMs} ms; see ${await tail(logFile)}`);
}

async function tail(logFile: string): Promise<string> {
  const text = await readFile(logFile, "utf8").catch(() => "");
  return `${logFile}:\n${text.split("\n").slice(-20).join("\n")}`;
}

/** User + system CPU ms of the processes (all threads), from /proc; undefined off Linux. */
export async function processCpuMs(pids: number[]): Promise<number | undefined> {
  try {
    let ticks = 0;
    for (const pid of await withDescendants(pids)) {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      // Fields after the command name "(...)": utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    }
    return ticks * 10; // USER_HZ is 100 on Linux
  } catch (error) {
    // No /proc (not Linux): the figure is simply not reported.
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** The processes and every process they started (npm start's workers, CONSENT_WORKERS). */
async function withDescendants(pids: number[]): Promise<number[]> {
  const all: number[] = [];
  const pending = [...pids];
  while (pending.length > 0) {
    const pid = pending.pop() as number;
    all.push(pid);
    for (const task of await readdir(`/proc/${pid}/task`).catch(() => [])) {
      const children = await readFile(`/proc/${pid}/task/${task}/children`, "utf8").catch(() => "");
      pending.push(...children.split(" ").filter(Boolean).map(Number));
    }
  }
  return all;
}

/** 200 from GET <url>/api/v1/health: the gateway answers and reaches the daemon and its store. */
async function healthy(gatewayUrl: string): Promise<boolean> {
  const response = await fetch(`${gatewayUrl}/api/v1/health`);
  await response.arrayBuffer();
  return response.status === 200;
}

function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * Starts the service the way an operator would (the package's bins), on free ports, and waits
 * until the REST health route answers 200.
 */
export async function startService(
  topology: Topology,
  options: StartOptions,
): Promise<RunningService> {
  const [httpPort, grpcPort] = [await freePort(), await freePort()];
  const daemonUrl = `http://127.0.0.1:${grpcPort}`;
  const gatewayUrl = `http://127.0.0.1:${httpPort}`;
  const env = {
    CONSENT_DATA_DIR: options.dataDir,
    CONSENT_LOG_LEVEL: "warn",
    CONSENT_HTTP_HOST: "127.0.0.1",
    CONSENT_HTTP_PORT: String(httpPort),
    CONSENT_GRPC_HOST: "127.0.0.1",
    CONSENT_GRPC_PORT: String(grpcPort),
    CONSENT_DAEMON_URL: daemonUrl,
    // The single-process topology is measured with both cores serving (bench/README.md).
    CONSENT_WORKERS: "2",
    ...options.env,
  };
  const io = { env, logFile: options.logFile, profileDir: options.profileDir };
  const children: ChildProcess[] = [];
  try {
    if (topology === "single") {
      children.push(startProcess("consent", ["bin/consent.js"], io));
    } else {
      children.push(startProcess("consentd", ["bin/consentd.js"], io));
      // The gateway reads the operator token the daemon writes on a first start.
      await waitUntil("consentd", () => acceptsConnections(grpcPort), children, options.logFile);
      children.push(startProcess("consent-gateway", ["bin/consent-gateway.js"], io));
    }
    await waitUntil(`${topology} service`, () => healthy(gatewayUrl), children, options.logFile);
  } catch (error) {
    await Promise.all(children.map((child) => stopProcess(child)));
    throw error;
  }
  return {
    topology,
    gatewayUrl,
    daemonUrl,
    pids: children.map((child) => child.pid ?? -1),
    // The gateway first, so in-flight calls can still reach the daemon while it drains.
    async stop() {
      for (const child of [...children].reverse()) await stopProcess(child);
    },
  };
}
