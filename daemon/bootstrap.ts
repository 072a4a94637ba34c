import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { generateOperatorToken } from "#daemon/auth/secrets.js";
import type { Config } from "#daemon/config.js";
import { type IdentityKey, parseIdentityKeys } from "#daemon/identity/subject-identity.js";

export const ADMIN_TOKEN_FILE = "admin-token";
export const IDENTITY_KEY_FILE = "identity-key";

/** What start-up found or created; `created` lists the secrets made on this start. */
export interface Secrets {
  operatorToken: string;
  identityKeys: IdentityKey[];
  /** Why subject hashing is unavailable, when it is (subject endpoints then answer 503). */
  identityProblem: string | undefined;
  created: string[];
}

/**
 * First start of a fresh machine (decisions §1): creates the data directory, the operator token and,
 * for the embedded store, the identity key. Files are written exclusively ("wx"), so two daemons
 * starting together on one data directory end up sharing whichever secret was written first.
 */
export async function loadSecrets(config: Config): Promise<Secrets> {
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const created: string[] = [];
  const operatorToken =
    config.adminToken ??
    (await readOrCreate(
      path.join(config.dataDir, ADMIN_TOKEN_FILE),
      generateOperatorToken,
      created,
    ));
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

async function readOrCreate(file: string, make: () => string, created: string[]): Promise<string> {
  try {
    await writeFile(file, `${make()}\n`, { flag: "wx", mode: 0o600 });
    created.push(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  return (await readFile(file, "utf8")).trim();
}

/** The operator token for a process that must not create one (gateway, CLI). */
export async function readOperatorToken(config: Config): Promise<string | undefined> {
  if (config.adminToken) return config.adminToken;
  try {
    return (await readFile(path.join(config.dataDir, ADMIN_TOKEN_FILE), "utf8")).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}
