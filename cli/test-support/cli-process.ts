import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath, pathToFileURL } from "node:url";
import { expect } from "vitest";
import { startTestService, type TestService } from "#test/support/service.js";

/**
 * Per-test time limit of the end-to-end files: each test runs several child processes (about
 * half a second of CPU each, started from the bundle of bin/bundle.js; the first run after a
 * change builds it), a file's tests run side by side, and a shared two-core runner runs another
 * such file beside it: before the bundle, a test of ten commands took 120 s there, though 15 s
 * alone.
 */
export const E2E_TIMEOUT_MS = 240_000;

/** bin/consentctl.js, the program an operator runs. */
export const BIN = fileURLToPath(new URL("../../bin/consentctl.js", import.meta.url));
const RUN_TS = pathToFileURL(fileURLToPath(new URL("../../bin/run-ts.js", import.meta.url))).href;

/** What one `consentctl` child process did. */
export interface CliRun {
  code: number | null;
  /** The signal that ended the process, when one did (then `code` is null). */
  signal?: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliRunOptions {
  /** The process environment, on top of a clean one (childEnv: no CONSENT_* leaks in). */
  env?: Record<string, string>;
  /** The working directory; the runner's unless set. */
  cwd?: string;
  /** A file descriptor stdout writes to (a file, /dev/full) instead of a pipe. */
  stdout?: number;
  /** The same for stderr. */
  stderr?: number;
}

/**
 * The environment of a consentctl child: PATH and HOME, and the runner's time zone and locale
 * (TZ, LANG, LANGUAGE, LC_*), so a run of the suite in an operator's zone and language
 * (`TZ=Pacific/Chatham LC_ALL=de_DE.UTF-8 npm test`) reaches consentctl as well; nothing else
 * from the runner (no CONSENT_* leaks in), then `env`.
 */
export function childEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const zoneAndLocale = Object.entries(process.env).filter(
    ([name]) => name === "TZ" || name === "LANG" || name === "LANGUAGE" || name.startsWith("LC_"),
  );
  return {
    ...Object.fromEntries(zoneAndLocale),
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...env,
  };
}

/** Runs bin/consentctl.js as an operator would, with piped stdio. */
export function runCli(args: readonly string[], options: CliRunOptions = {}): Promise<CliRun> {
  return runNode([BIN, ...args], options);
}

/**
 * Runs consentctl from its sources through tsx (bin/run-ts.js), as bin/consentctl.js does where
 * no bundle can be kept (a read-only installation).
 */
export function runCliFromSources(
  args: readonly string[],
  options: CliRunOptions = {},
): Promise<CliRun> {
  const script = `const { run } = await import(${JSON.stringify(RUN_TS)});
const { main } = await run("../cli/main.tsx");
await main(["node", "consentctl", ...process.argv.slice(1)]);`;
  // After "--", so Node leaves options it also has (-V, --debug) to consentctl.
  return runNode(["--input-type=module", "--eval", script, "--", ...args], options);
}

function runNode(nodeArgs: readonly string[], options: CliRunOptions): Promise<CliRun> {
  const env = childEnv(options.env);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs, {
      env,
      cwd: options.cwd,
      stdio: ["ignore", options.stdout ?? "pipe", options.stderr ?? "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A running `consentctl` (logs tail): its output so far, a wait for some of it, and a stop. */
export interface CliProcess {
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Resolves once stdout or stderr (as named) satisfies `test`; rejects if the process ends first. */
  waitFor(stream: "stdout" | "stderr", test: (text: string) => boolean): Promise<string>;
  /** Sends SIGINT, as Ctrl-C does, and resolves with how the process ended. */
  interrupt(): Promise<CliRun>;
  /** Closes the reading end of stdout, as `| head -n1` does once it has its line. */
  closeStdout(): void;
  /** Closes the reading end of stderr, as `2>&1 | head -n1` does. */
  closeStderr(): void;
  /** Resolves with how the process ended. */
  readonly ended: Promise<CliRun>;
}

/** Starts bin/consentctl.js and returns at once, for commands that run until stopped. */
export function startCli(args: readonly string[], options: CliRunOptions = {}): CliProcess {
  const env = childEnv(options.env);
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
  const output = { stdout: "", stderr: "" };
  let ended = false;
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of waiters) waiter();
  };
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output.stdout += chunk;
    notify();
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    output.stderr += chunk;
    notify();
  });
  const closed = new Promise<CliRun>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      ended = true;
      notify();
      resolve({ code, signal, ...output });
    });
  });
  return {
    stdout: () => output.stdout,
    stderr: () => output.stderr,
    waitFor(stream, test) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (test(output[stream])) {
            waiters.delete(check);
            resolve(output[stream]);
          } else if (ended) {
            waiters.delete(check);
            reject(new Error(`consentctl ended first: ${JSON.stringify(output)}`));
          }
        };
        waiters.add(check);
        check();
      });
    },
    interrupt() {
      child.kill("SIGINT");
      return closed;
    },
    closeStdout() {
      child.stdout.destroy();
    },
    closeStderr() {
      child.stderr.destroy();
    },
    ended: closed,
  };
}

/**
 * A `consentctl` bound to a test daemon: `--daemon`, `--token` and the data dir are filled in.
 * `json(...)` adds --json and checks the JSON contract: exit 0, stdout is exactly one JSON
 * document, stderr is empty.
 */
export function cliFor(service: TestService, env: Record<string, string> = {}) {
  const connection = ["--daemon", service.daemonUrl, "--token", service.operatorToken];
  const withEnv = { CONSENT_DATA_DIR: service.dataDir, ...env };
  const run = (args: readonly string[], options: CliRunOptions = {}) =>
    runCli([...args, ...connection], { env: { ...withEnv, ...options.env } });
  return {
    run,
    /** Starts a long-running command (logs tail) bound to the daemon. */
    start: (args: readonly string[], options: CliRunOptions = {}) =>
      startCli([...args, ...connection], { env: { ...withEnv, ...options.env } }),
    /** Runs with --json and returns the parsed stdout of a successful run. */
    // biome-ignore lint/suspicious/noExplicitAny: parsed --json output, checked by each test's assertions
    async json<T = any>(args: readonly string[]): Promise<T> {
      const result = await run([...args, "--json"]);
      expect(result.stderr, `stderr of ${args.join(" ")}`).toBe("");
      expect(result.code, `exit code of ${args.join(" ")}`).toBe(0);
      return parseSingleJson(result.stdout) as T;
    },
    /** Runs with --json, expects exit 1, an empty stdout and a JSON error on stderr. */
    async fails(args: readonly string[]): Promise<{
      error: string;
      code: string;
      hint?: string;
      details?: { field: string; message: string }[];
    }> {
      const result = await run([...args, "--json"]);
      expect(result.stdout, `stdout of failing ${args.join(" ")}`).toBe("");
      expect(result.code, `exit code of ${args.join(" ")}`).toBe(1);
      return parseSingleJson(result.stderr) as never;
    },
  };
}

/**
 * A command line as a template: literal text splits on whitespace, interpolated values stay one
 * argument each, so `argv\`teams create --name ${"Acme Ltd"}\`` is ["teams", "create", "--name", "Acme Ltd"].
 */
export function argv(strings: TemplateStringsArray, ...values: string[]): string[] {
  return strings.flatMap((text, i) => {
    const words = text.split(/\s+/).filter(Boolean);
    return i < values.length ? [...words, values[i] as string] : words;
  });
}

/**
 * A daemon of its own for one test file (and the REST gateway, with `gateway`), a CLI bound to
 * it, and one team to work in.
 */
export async function startServiceWithTeam(
  plan: string,
  env: Record<string, string> = {},
  { gateway = false }: { gateway?: boolean } = {},
) {
  // The daemon and the CLI read the same environment, as on an operator's machine.
  const service = await startTestService({ env, gateway });
  const cli = cliFor(service, env);
  const team = await cli.json(argv`teams create --name ${`${plan} team`} --plan ${plan}`);
  return { service, cli, teamId: team.id as string };
}

/**
 * A server that is not the daemon: plain HTTP/1.1 on a port of its own, as the REST gateway's
 * port is, for a CLI pointed at the wrong address.
 */
export async function startHttp1Server(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_request, response) => response.end("not the daemon\n"));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** Parses text that must be one JSON document and nothing else. */
export function parseSingleJson(text: string): unknown {
  expect(text.endsWith("\n")).toBe(true);
  return JSON.parse(text);
}
