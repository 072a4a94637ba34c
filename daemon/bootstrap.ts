import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { copyFile, link, mkdir, open, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import { type Config, StartupError } from "#daemon/config.js";
import { type IdentityKey, parseIdentityKeys } from "#daemon/identity/subject-identity.js";
import {
  COUNTERS_DIRECTORY,
  DATA_FILE,
  hasDataFile,
  LOCK_FILE,
  RECORDS_DIRECTORY,
} from "#daemon/store/lmdb-files.js";

export const ADMIN_TOKEN_FILE = "admin-token";
export const IDENTITY_KEY_FILE = "identity-key";

/** The shortest operator token accepted (CONSENT_ADMIN_TOKEN or the admin-token file). */
export const MIN_OPERATOR_TOKEN_LENGTH = 32;

/** The files of a data directory that must be the owner's alone: secrets and the store's. */
const PRIVATE_FILES = [
  ADMIN_TOKEN_FILE,
  IDENTITY_KEY_FILE,
  ...[RECORDS_DIRECTORY, COUNTERS_DIRECTORY].flatMap((directory) =>
    [DATA_FILE, LOCK_FILE].map((file) => `${directory}/${file}`),
  ),
];

/**
 * The directories holding them, which every user must not be able to write to: whoever may write
 * in one may replace what it holds (a token of their own, another store). Others may read them (a
 * data directory made beforehand as 0755 is taken as it is): the files themselves are private.
 * A group that may write is the operator's choice (a Kubernetes volume's fsGroup, an image made
 * for an arbitrary user of group 0, which applies 2770 or 0775 on every mount), not a mistake.
 */
const PRIVATE_DIRECTORIES = [".", RECORDS_DIRECTORY, COUNTERS_DIRECTORY];

/**
 * The data directory's private files that other users may read or write, and its directories
 * every user may write in, each with its mode, as one sentence ("other users may read or write
 * records/data.mdb (644), the directory records (777) in <dir>"); undefined when there are none.
 * Such modes were left by an older version, before the store's files were created owner-only, or
 * by a copy or a chmod. The service creates them owner-only and never changes the mode of one
 * that exists, so start-up and `consentctl doctor` report them instead.
 */
export async function exposedFiles(dataDir: string): Promise<string | undefined> {
  const exposed: string[] = [];
  const modeOf = (info: { mode: number }) => (info.mode & 0o777).toString(8);
  for (const directory of PRIVATE_DIRECTORIES) {
    const info = await stat(path.join(dataDir, directory)).catch(() => undefined);
    if (info && (info.mode & 0o002) !== 0) {
      const named = directory === "." ? "the data directory" : `the directory ${directory}`;
      exposed.push(`${named} (${modeOf(info)})`);
    }
  }
  for (const file of PRIVATE_FILES) {
    const info = await stat(path.join(dataDir, file)).catch(() => undefined);
    if (info && (info.mode & 0o077) !== 0) {
      exposed.push(`${file} (${modeOf(info)})`);
    }
  }
  if (exposed.length === 0) return undefined;
  return `other users may read or write ${exposed.join(", ")} in ${dataDir}`;
}

/** What start-up found or created; `created` lists the secrets made on this start. */
export interface Secrets {
  operatorToken: string;
  identityKeys: IdentityKey[];
  /** Why subject hashing is unavailable, when it is (subject endpoints then answer 503). */
  identityProblem: string | undefined;
  created: string[];
}

/** RFC 6750's b64token: what may follow `Bearer ` in an Authorization header. */
const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * Why the daemon refuses to start with `token` as its operator token, as the end of a sentence
 * naming where it came from; undefined when it accepts it. `consentctl doctor` says the same of
 * the token it finds.
 */
export function operatorTokenProblem(token: string): string | undefined {
  // It travels as `Authorization: Bearer <token>` (RFC 6750's b64token): a space or a control
  // character would make a token no client can send, and every operator call would be refused.
  if (!BEARER_TOKEN.test(token)) {
    return "cannot be sent as a Bearer token: use only letters, digits and - . _ ~ + / (then =), no spaces";
  }
  // Wrong guesses are limited (10 a minute per address, spec 8), but a short chosen token would
  // still be within reach; the generated one has 43 random characters.
  if (token.length < MIN_OPERATOR_TOKEN_LENGTH) {
    return `is shorter than ${MIN_OPERATOR_TOKEN_LENGTH} characters: make one with \`openssl rand -base64 32\``;
  }
  return undefined;
}

/**
 * First start of a fresh machine (decisions §1): creates the data directory, the operator token and,
 * for the embedded store, the identity key. Two daemons starting together on one data directory
 * end up sharing whichever secret was written first (readOrCreate).
 */
export async function loadSecrets(config: Config): Promise<Secrets> {
  try {
    await makeDirectories(config.dataDir, 0o700);
  } catch (error) {
    throw new StartupError(
      `cannot create the data directory ${config.dataDir} (CONSENT_DATA_DIR): ${(error as Error).message}`,
      { cause: error },
    );
  }
  const created: string[] = [];
  const tokenFile = path.join(config.dataDir, ADMIN_TOKEN_FILE);
  const operatorToken =
    config.adminToken ?? (await readOrCreate(tokenFile, generateOperatorToken, created));
  // An empty token would let an empty credential pass as the operator's.
  if (!operatorToken) {
    throw new StartupError(
      `${tokenFile} is empty: delete it to have a new operator token made, or set CONSENT_ADMIN_TOKEN`,
    );
  }
  const problem = operatorTokenProblem(operatorToken);
  if (problem) {
    const source = config.adminToken === undefined ? tokenFile : "CONSENT_ADMIN_TOKEN";
    throw new StartupError(`the operator token in ${source} ${problem}`);
  }
  const identity = await identityKeys(config, created);
  return { operatorToken, ...identity, created };
}

async function identityKeys(config: Config, created: string[]) {
  if (config.identityKey) {
    // A malformed key in the environment is a configuration error: refuse to start.
    return { identityKeys: parseIdentityKeys(config.identityKey), identityProblem: undefined };
  }
  if (config.mongoUri) {
    return { identityKeys: [], identityProblem: "CONSENT_IDENTITY_KEY is required with MongoDB" };
  }
  const file = path.join(config.dataDir, IDENTITY_KEY_FILE);
  // Looked at before the key: a first start writes the key before it creates the store, so a
  // store without its key is one whose key went missing, not a start racing another.
  const storeExists = await hasDataFile(config.dataDir, RECORDS_DIRECTORY);
  if (storeExists && (await readIfPresent(file)) === undefined) {
    // A new key would leave every subject record written under the old one unreachable.
    return {
      identityKeys: [],
      identityProblem: `${file} is missing, but the data directory holds a store whose subject records were written under it: restore the file (consentctl backup copies it) or set CONSENT_IDENTITY_KEY to that key; to go on with a new key instead, write one to the file (openssl rand -base64 32), and the old records stay unreachable`,
    };
  }
  const value = await readOrCreate(file, () => randomBytes(32).toString("base64"), created);
  try {
    return { identityKeys: parseIdentityKeys(value), identityProblem: undefined };
  } catch (error) {
    // Never overwrite a damaged key: records hashed under it would become unreachable.
    return {
      identityKeys: [],
      identityProblem: `${file} is unusable (${(error as Error).message})`,
    };
  }
}

/**
 * `mkdir -p`: `directory` and any missing parent, each made at most once (another process making
 * one meanwhile is fine). Not Node's `recursive`, which spins for ever, a core busy and start-up
 * deaf to a first SIGTERM, where the kernel refuses a new directory with ENOENT though its parent
 * exists (under /proc): there the second refusal is the answer.
 */
async function makeDirectories(directory: string, mode: number, parentMade = false) {
  try {
    await mkdir(directory, { mode });
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    if (code === "EEXIST" && (await stat(directory)).isDirectory()) return;
    const parent = path.dirname(directory);
    if (code !== "ENOENT" || parentMade || parent === directory) throw error;
    await makeDirectories(parent, mode);
    await makeDirectories(directory, mode, true);
  }
}

/**
 * The secret in `file`, made by `make` when there is none. A secret that exists is only read (the
 * directory may be read-only then). A new one is written whole to a file of its own and linked
 * into place: a link fails when the name exists, so two processes starting together never read
 * a secret half written, and the first one's secret is the one both keep. Where the file system
 * has no hard links, an exclusive create stands in (the window it leaves is the write itself).
 */
async function readOrCreate(file: string, make: () => string, created: string[]): Promise<string> {
  const existing = await readIfPresent(file);
  if (existing !== undefined) return existing;
  const draft = `${file}.${process.pid}.${randomBytes(6).toString("hex")}`;
  try {
    const handle = await open(draft, "wx", 0o600);
    try {
      await handle.writeFile(`${make()}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await placeExclusively(draft, file);
    created.push(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
      throw permissionFailure(file, error, "write");
    }
  } finally {
    await rm(draft, { force: true });
  }
  return (await readFile(file, "utf8")).trim();
}

/** The file's trimmed text, or undefined when there is no such file. */
async function readIfPresent(file: string): Promise<string | undefined> {
  try {
    return (await readFile(file, "utf8")).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw permissionFailure(file, error, "read");
  }
}

/**
 * A secret file this user may not read or write, or a directory where the file belongs, as a
 * StartupError naming what to look at (Node's words name only the file); any other failure as it
 * is.
 */
function permissionFailure(file: string, error: unknown, verb: "read" | "write"): unknown {
  const { code, message } = error as NodeJS.ErrnoException;
  if (code === "EISDIR") {
    return new StartupError(
      `cannot ${verb} ${file}: it is a directory, where the file belongs; move it away`,
      { cause: error },
    );
  }
  return code === "EACCES" || code === "EPERM" || code === "EROFS"
    ? new StartupError(
        `cannot ${verb} ${file}: ${message} (this user may not ${verb} the data directory, CONSENT_DATA_DIR)`,
        { cause: error },
      )
    : error;
}

/** Codes of a file system that has no hard links (some FUSE, SMB and exFAT mounts). */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EXDEV"]);

/** Gives `draft`'s content the name `file` unless `file` exists (EEXIST then). */
async function placeExclusively(draft: string, file: string): Promise<void> {
  try {
    await link(draft, file);
  } catch (error) {
    if (!NO_HARD_LINKS.has((error as NodeJS.ErrnoException).code ?? "")) throw error;
    await copyFile(draft, file, constants.COPYFILE_EXCL);
  }
}

/** The operator token for a process that must not create one (gateway, CLI). */
export async function readOperatorToken(config: Config): Promise<string | undefined> {
  if (config.adminToken) return config.adminToken;
  return readIfPresent(path.join(config.dataDir, ADMIN_TOKEN_FILE));
}
