import path from "node:path";
import { fileFailure } from "#cli/file-errors.js";
import { metadataValueProblem } from "#cli/option-parsers.js";
import { UserError } from "#cli/problems.js";
import { ADMIN_TOKEN_FILE, readOperatorToken } from "#daemon/bootstrap.js";
import { type Config, ConfigError, loadConfig, StartupError } from "#daemon/config.js";

/** The options every command accepts (set on the program, read with optsWithGlobals). */
export interface GlobalOptions {
  daemon?: string;
  token?: string;
  json?: boolean;
  debug?: boolean;
}

/** Settings of one invocation, from the global options over the environment (decisions §1). */
export interface CommandContext {
  daemonUrl: string;
  /** CONSENT_BASE_URL: where the gateway serves loader scripts. */
  baseUrl: string;
  dataDir: string;
  json: boolean;
  debug: boolean;
  env: NodeJS.ProcessEnv;
  /** The variables the CLI reads, parsed, or why they do not parse (the doctor reports it). */
  config: Config | ConfigError;
}

/** The variables consentctl itself reads; a broken gateway port is no reason to refuse `teams list`. */
export const CLI_VARIABLES = [
  "CONSENT_DATA_DIR",
  "CONSENT_ADMIN_TOKEN",
  "CONSENT_DAEMON_URL",
  "CONSENT_BASE_URL",
] as const;

const DEFAULT_DAEMON_URL = "http://127.0.0.1:50051";
const DEFAULT_BASE_URL = "http://localhost:8080";

/**
 * Reads the environment with the daemon's own loadConfig, so CLI and daemon agree on every
 * default. A malformed variable does not throw here: `doctor` must be able to report it.
 */
export function resolveContext(globals: GlobalOptions, env: NodeJS.ProcessEnv): CommandContext {
  const config = tryLoadConfig(Object.fromEntries(CLI_VARIABLES.map((name) => [name, env[name]])));
  const loaded = config instanceof ConfigError ? undefined : config;
  return {
    daemonUrl: globals.daemon ?? loaded?.daemonUrl ?? DEFAULT_DAEMON_URL,
    baseUrl: loaded?.baseUrl ?? DEFAULT_BASE_URL,
    dataDir: loaded?.dataDir ?? path.resolve(env.CONSENT_DATA_DIR || "./data"),
    json: globals.json === true,
    debug: globals.debug === true,
    env,
    config,
  };
}

/** loadConfig, with a ConfigError returned rather than thrown. */
export function tryLoadConfig(env: NodeJS.ProcessEnv): Config | ConfigError {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
}

/** The operator token and where it came from (named in hints when the daemon refuses it). */
export interface OperatorToken {
  token: string;
  source: string;
}

/** Finds the operator token: --token, then CONSENT_ADMIN_TOKEN, then <data dir>/admin-token. */
export async function findOperatorToken(
  globals: GlobalOptions,
  context: CommandContext,
): Promise<OperatorToken | undefined> {
  if (globals.token) return { token: globals.token, source: "--token" };
  if (context.config instanceof ConfigError) throw context.config;
  const file = path.join(context.dataDir, ADMIN_TOKEN_FILE);
  const elsewhere =
    "point CONSENT_DATA_DIR at the daemon's data directory, or pass --token / set CONSENT_ADMIN_TOKEN";
  let token: string | undefined;
  try {
    token = await readOperatorToken(context.config);
  } catch (error) {
    // The daemon's words for its log name the file again (bootstrap.ts, permissionFailure): the
    // file system's own error, their cause, is the reason here.
    const cause = error instanceof StartupError && error.cause ? error.cause : error;
    const { reason, hint } = fileFailure(file, cause, "read", elsewhere);
    throw new UserError(
      `Cannot read the operator token at ${file}: ${reason}.`,
      hint,
      "token_unreadable",
    );
  }
  if (token === undefined) return undefined;
  // A daemon refuses to start on an empty file (bootstrap.ts): it holds no token of any daemon.
  if (token === "") {
    throw new UserError(`The operator token file ${file} is empty.`, elsewhere, "token_unreadable");
  }
  const source = context.config.adminToken ? "CONSENT_ADMIN_TOKEN" : file;
  const problem = metadataValueProblem(token);
  if (problem) {
    throw new UserError(
      `The operator token in ${source} ${problem}.`,
      `write the token as the daemon made it (${file} on its machine), or pass --token`,
      "token_unreadable",
    );
  }
  return { token, source };
}

/** Like findOperatorToken, for commands that cannot run without one. */
export async function requireOperatorToken(
  globals: GlobalOptions,
  context: CommandContext,
): Promise<OperatorToken> {
  const found = await findOperatorToken(globals, context);
  if (found) return found;
  throw new UserError(
    "No operator token found.",
    `pass --token, set CONSENT_ADMIN_TOKEN, or set CONSENT_DATA_DIR to the daemon's data directory (looked for ${path.join(context.dataDir, ADMIN_TOKEN_FILE)})`,
    "no_token",
  );
}
