import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect } from "vitest";
import { consentState, createBanner, createTeam, http, mintKey } from "#test/support/api.js";
import type { TestService } from "#test/support/service.js";

/** The package's directory, where its programs are. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The package's programs, as `npm start` and the `bin` entries run them. */
export const PROGRAMS = {
  /** npm start: daemon and gateway in one process. */
  consent: "bin/consent.js",
  consentd: "bin/consentd.js",
  gateway: "bin/consent-gateway.js",
} as const;

/** A running program with everything it has written so far. */
export interface Program {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first capture group of `pattern` once stdout matches it. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Sends `signal` (if still running) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  exited: Promise<number | null>;
  /** The exit code, or "still running" if the program has not exited after `timeoutMs`. */
  exitWithin(timeoutMs: number): Promise<number | null | "still running">;
}

const running = new Set<Program>();

/** Resource limits of a started program. */
export interface ProgramLimits {
  /** Largest file the program may write, in KiB. */
  fileSizeKb?: number;
}

/** Where a started program runs (default: the package's directory), and its limits. */
interface ProgramOptions extends ProgramLimits {
  cwd?: string;
  /** The package directory whose bin/ the program is started from (copyPrograms); ROOT unless set. */
  root?: string;
}

/** How a test service is started: limits, and how long it may take to print its URLs. */
export interface ServiceStart extends ProgramLimits {
  /** Default 30 s (Program.waitFor): on a loaded CI machine a start has taken over 15. */
  startupMs?: number;
}

/**
 * Starts one of the package's programs as a child process with a clean CONSENT_* environment (the
 * test runner's own settings must not leak in) plus `env`. Ports default to 0: the program prints
 * the URLs it listens on.
 */
export function startProgram(
  bin: string,
  env: Record<string, string>,
  { cwd = ROOT, root = ROOT, ...limits }: ProgramOptions = {},
): Program {
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !name.startsWith("CONSENT_") && name !== "MONGODB_URI" && name !== "PORT",
    ),
  );
  // A file size limit (bash's `ulimit -f`, in KiB) makes the disk refuse writes past it.
  const [command, args] =
    limits.fileSizeKb === undefined
      ? [process.execPath, [path.join(root, bin)]]
      : [
          "bash",
          [
            "-c",
            `ulimit -f ${limits.fileSizeKb} && exec "$0" "$@"`,
            process.execPath,
            path.join(root, bin),
          ],
        ];
  const child = spawn(command, args, {
    cwd,
    env: {
      ...inherited,
      CONSENT_LOG_LEVEL: "warn",
      CONSENT_HTTP_PORT: "0",
      CONSENT_GRPC_PORT: "0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return watchProgram(child, bin);
}

/**
 * Runs a command line a program printed for the operator to paste (`NAME=value … node <bin>`) as a
 * shell would, in `cwd` with no environment but PATH: what the line says is all it gets.
 */
export function startPrinted(commandLine: string, cwd: string): Program {
  // The shell reads the line's words and quoting; env sets its NAME=value words and runs the
  // rest in the shell's place, so the signals Program.stop sends reach the program itself.
  const child = spawn("sh", ["-c", `exec env ${commandLine}`], {
    cwd,
    env: { PATH: process.env.PATH },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return watchProgram(child, commandLine);
}

/** A started program, its output collected, stopped with the others by stopAllPrograms. */
function watchProgram(child: ChildProcess, bin: string): Program {
  let out = "";
  let err = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
  });
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
  });
  /**
   * The signal the test sent last. Our programs answer SIGTERM and SIGINT with an exit code, so a
   * program ended by a signal other than the test's SIGKILL crashed: its stderr goes to the log.
   */
  let sent: NodeJS.Signals | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code, signal) => {
      if (signal && sent !== "SIGKILL") {
        process.stderr.write(`${bin} was ended by ${signal}; its stderr:\n${err.slice(-4000)}\n`);
      }
      resolve(code);
    });
  });
  const program: Program = {
    child,
    exited,
    exitWithin: (timeoutMs) =>
      Promise.race([exited, pause(timeoutMs).then(() => "still running" as const)]),
    stdout: () => out,
    stderr: () => err,
    async waitFor(pattern, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const match = pattern.exec(out);
        if (match) return match[1] ?? match[0];
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`${bin} exited (${child.exitCode}) before printing ${pattern}:\n${err}`);
        }
        if (Date.now() > deadline) {
          throw new Error(`${bin} did not print ${pattern} in ${timeoutMs} ms:\n${out}\n${err}`);
        }
        await Promise.race([exited, pause(50)]);
      }
    },
    async stop(signal = "SIGTERM", timeoutMs = 10_000) {
      if (child.exitCode === null && child.signalCode === null) {
        sent = signal;
        child.kill(signal);
      }
      const timer = setTimeout(() => {
        sent = "SIGKILL";
        child.kill("SIGKILL");
      }, timeoutMs);
      try {
        const code = await exited;
        // Output written just before the exit may still be in the pipe: read it to the end
        // (bounded, since a process the child started may hold the pipe open).
        if (child.stdout && !child.stdout.closed) {
          await Promise.race([once(child.stdout, "close"), pause(1_000)]);
        }
        return code;
      } finally {
        clearTimeout(timer);
        running.delete(program);
      }
    },
  };
  running.add(program);
  return program;
}

/** README, "Logs": the lines of a program's stdout that begin with `{` are its log, parsed. */
export function logLines(program: Program): Record<string, unknown>[] {
  return program
    .stdout()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * For a describe of process tests: a temporary directory for their data directories
 * (`join(name)`), and once they are done, every program stopped and the directory removed.
 */
export function useProgramRoot(prefix: string): { join(name: string): string } {
  let root = "";
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), prefix));
  });
  afterAll(async () => {
    await stopAllPrograms();
    await rm(root, { recursive: true, force: true });
  });
  return { join: (name) => path.join(root, name) };
}

/** Kills every program still running: for afterEach/afterAll, so no test leaves a child behind. */
export async function stopAllPrograms(): Promise<void> {
  await Promise.all([...running].map((program) => program.stop("SIGKILL")));
}

function pause(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The URLs `npm start` and consentd print on start-up. */
export const DAEMON_URL = /gRPC \/ Connect daemon\s+(http:\/\/\S+)/;
export const GATEWAY_URL = /REST gateway\s+(http:\/\/\S+)/;
export const STANDALONE_GATEWAY_URL = /consent gateway listening on (http:\/\/[^\s,]+)/;

/**
 * The addresses of programs started here, in the shape test/support/api.ts helpers take (they use
 * only the URLs and the operator token).
 */
export function endpoints(
  running: Pick<TestService, "gatewayUrl" | "daemonUrl" | "operatorToken">,
): TestService {
  return running as TestService;
}

/** The operator token a daemon started on `dataDir` wrote there (admin-token) and accepts. */
export async function operatorTokenOf(dataDir: string): Promise<string> {
  return (await readFile(path.join(dataDir, "admin-token"), "utf8")).trim();
}

/** `npm start` on `dataDir`, once it has printed its URLs; the token is the one it uses. */
export async function startService(
  dataDir: string,
  env: Record<string, string> = {},
  start: ServiceStart = {},
) {
  const program = startProgram(PROGRAMS.consent, { CONSENT_DATA_DIR: dataDir, ...env }, start);
  const gatewayUrl = await program.waitFor(GATEWAY_URL, start.startupMs);
  const daemonUrl = await program.waitFor(DAEMON_URL, start.startupMs);
  const operatorToken = await operatorTokenOf(dataDir);
  return { program, service: endpoints({ gatewayUrl, daemonUrl, operatorToken }) };
}

/** consentd on `dataDir` (and `env`), once it has printed its URL. */
export async function startDaemon(dataDir: string, env: Record<string, string> = {}) {
  const program = startProgram(PROGRAMS.consentd, { CONSENT_DATA_DIR: dataDir, ...env });
  return { program, url: await program.waitFor(DAEMON_URL) };
}

/**
 * consentd on `dataDir` (with `daemonEnv`), on a port of its own, and a stand-alone gateway (with
 * `gatewayEnv`) calling it: `restartDaemon` starts the daemon again on the same port once stopped,
 * which the gateway keeps calling as the address it started with.
 */
export async function startSplitService(
  dataDir: string,
  gatewayEnv: Record<string, string> = {},
  daemonEnv: Record<string, string> = {},
) {
  const port = await freePort();
  const restartDaemon = () =>
    startDaemon(dataDir, { ...daemonEnv, CONSENT_GRPC_PORT: String(port) });
  const daemon = await restartDaemon();
  const gateway = startProgram(PROGRAMS.gateway, {
    CONSENT_DATA_DIR: dataDir,
    CONSENT_DAEMON_URL: daemon.url,
    ...gatewayEnv,
  });
  const service = endpoints({
    daemonUrl: daemon.url,
    gatewayUrl: await gateway.waitFor(STANDALONE_GATEWAY_URL),
    operatorToken: await operatorTokenOf(dataDir),
  });
  return { daemon, gateway, service, restartDaemon };
}

/**
 * A first `npm start` on `dataDir` that stores a team, a key, a banner and one subject state, then
 * stops: a store with something in it, for what a later start makes of it.
 */
export async function storeWithSubjectState(dataDir: string) {
  const first = await startService(dataDir);
  const { key, id: keyId } = await mintKey(first.service, await createTeam(first.service));
  const { publicId } = await createBanner(first.service, key);
  const stored = await http(first.service, "PUT", "/api/v1/consent/subjects/state", {
    key,
    body: { bannerId: publicId, subjectId: "kept", baseVersion: 0, consentState: consentState() },
  });
  expect(stored.status).toBe(200);
  expect(await first.program.stop()).toBe(0);
  return { key, keyId, publicId };
}

/** A TCP port on 127.0.0.1 that was free a moment ago (for a setting that needs a number). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * The processes `program` has started and which still run (Linux's /proc): the workers a primary
 * of `npm start` has forked, or the esbuild a program runs while it builds its bundle.
 */
export function childPids(program: Program): number[] {
  const pid = program.child.pid as number;
  return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map(Number);
}

/** The worker processes a primary of `npm start` has forked. */
export const workerPids = childPids;
