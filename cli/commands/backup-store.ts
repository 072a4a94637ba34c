import { constants, rmSync } from "node:fs";
import { chmod, copyFile, mkdir, open, realpath, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { fileFailure } from "#cli/file-errors.js";
import { UserError } from "#cli/problems.js";
import { ADMIN_TOKEN_FILE, IDENTITY_KEY_FILE } from "#daemon/bootstrap.js";
import { DATA_FILE, RECORDS_DIRECTORY } from "#daemon/store/lmdb-files.js";
import { storeFormatProblem } from "#daemon/store/store.js";

/** The records' data file, as a backup holds it too. */
const RECORDS_FILE = `${RECORDS_DIRECTORY}/${DATA_FILE}`;

/** One file of a backup, as written. */
export interface BackupFile {
  /** Path inside the backup directory ("records/data.mdb", "admin-token", "identity-key"). */
  file: string;
  bytes: number;
}

export interface BackupReport {
  /** The backup directory: a data directory a daemon can start on. */
  to: string;
  files: BackupFile[];
  /**
   * Whether the identity key came along: false when the data directory has no identity-key file
   * (the daemon reads CONSENT_IDENTITY_KEY), which the operator must then keep with the backup.
   */
  identityKeyIncluded: boolean;
  /** What the operator must keep beside the backup, or check, for a restore to work. */
  warnings: string[];
}

/**
 * Copies the embedded store of `dataDir` and its secrets into the new directory `to`, while the
 * service runs: the records environment through LMDB's own copy (mdb_env_copy2, compacted),
 * which reads one consistent snapshot in a read transaction and so never blocks a writer; then
 * the operator token and the identity key, without which no subject state could be found
 * again. The rate-limit counters are left out: they only hold the current windows.
 *
 * The result is a data directory: a daemon started with CONSENT_DATA_DIR set to it serves what
 * the store held at the snapshot. It is built beside `to` under a private name, every file
 * owner-only and synced, then renamed into place, so `to` either does not exist or is whole.
 */
export async function backupDataDir(
  dataDir: string,
  to: string,
  env: NodeJS.ProcessEnv,
): Promise<BackupReport> {
  if (!(await exists(path.join(dataDir, RECORDS_FILE)))) {
    throw new UserError(
      `There is no embedded store in ${dataDir}.`,
      "set CONSENT_DATA_DIR to the daemon's data directory; a daemon on MongoDB (MONGODB_URI) is backed up with mongodump",
      "no_store",
    );
  }
  const target = path.resolve(to);
  if (await exists(target)) {
    throw new UserError(
      `${target} already exists.`,
      "name a directory that does not exist yet: a backup never writes over files",
      "backup_exists",
    );
  }
  const parent = path.dirname(target);
  // A name of fixed length, so any name `to` may have (up to 255 bytes) leaves room for it.
  const draft = path.join(parent, `.consent-backup-${process.pid}.partial`);
  // One level at a time, never `recursive`: Node's recursive mkdir spins for ever where the
  // kernel answers ENOENT to a directory that exists (/proc). The parent must exist, as for cp.
  try {
    await mkdir(draft, { mode: 0o700 });
  } catch (error) {
    const why =
      isCode(error, "ENOENT") && !(await exists(parent))
        ? `${parent} does not exist`
        : `no directory can be made in ${parent} (${reason(draft, error, "write")})`;
    throw new UserError(
      `Cannot create the backup: ${why}.`,
      "name a new directory inside one that exists and this user may write to",
      "backup_failed",
    );
  }
  // Interrupted (Ctrl-C), the draft goes at once and the process ends; LMDB's copy runs in a
  // thread of its own that cannot be stopped, and ends with the process. The reader slot it
  // leaves in the store's lock file is cleared by the daemons (lmdb-store.ts, readerCheck).
  const abandon = () => {
    rmSync(draft, { recursive: true, force: true });
    process.exit(EXIT_INTERRUPTED);
  };
  process.once("SIGINT", abandon);
  process.once("SIGTERM", abandon);
  try {
    const { written, formatProblem } = await fillDraft(dataDir, draft);
    try {
      await rename(draft, target);
    } catch (error) {
      // A directory made at `to` while the copy ran, with something in it: left as it is.
      if (isCode(error, "ENOTEMPTY") || isCode(error, "EEXIST")) {
        throw new UserError(
          `${target} appeared while the backup was made.`,
          "run it again with a new directory",
          "backup_exists",
        );
      }
      throw error;
    }
    await sync(parent);
    const has = (name: string) => written.some(({ file }) => file === name);
    const warnings = warningsFor(has(IDENTITY_KEY_FILE), has(ADMIN_TOKEN_FILE), env);
    if (formatProblem !== undefined) {
      warnings.push(
        `a daemon of this version will not start on the backup: ${formatProblem.reason}; ${formatProblem.backupAdvice}`,
      );
    }
    if (await liesWithin(target, dataDir)) {
      warnings.push(
        "the backup lies inside the data directory: it is lost with that directory or its disk; move it elsewhere",
      );
    }
    return {
      to: target,
      files: written,
      identityKeyIncluded: has(IDENTITY_KEY_FILE),
      warnings,
    };
  } catch (error) {
    await rm(draft, { recursive: true, force: true });
    if (error instanceof UserError) throw error;
    throw new UserError(
      `The backup failed: ${reason(draft, error, "write")}.`,
      "check that the backup's disk has room and that this user may read the data directory",
      "backup_failed",
    );
  } finally {
    process.off("SIGINT", abandon);
    process.off("SIGTERM", abandon);
  }
}

/**
 * The secrets a restore needs that the data directory does not hold, or may not be the ones the
 * daemon uses (config.ts: CONSENT_IDENTITY_KEY wins over the file). `env` is this command's
 * environment, usually the daemon's on the same machine, but not necessarily.
 */
function warningsFor(identityKeyFile: boolean, adminTokenFile: boolean, env: NodeJS.ProcessEnv) {
  const warnings: string[] = [];
  if (!identityKeyFile) {
    warnings.push(
      "no identity-key file: the daemon reads CONSENT_IDENTITY_KEY; keep that value with this backup, or no subject state can be found after a restore",
    );
  } else if (env.CONSENT_IDENTITY_KEY) {
    warnings.push(
      "CONSENT_IDENTITY_KEY is set here: a daemon that reads it uses it, not the identity-key file; keep that value with this backup",
    );
  }
  if (!adminTokenFile) {
    warnings.push(
      "no admin-token file: the operator token comes from CONSENT_ADMIN_TOKEN; a daemon restored from this backup makes a new one unless that variable is set",
    );
  }
  return warnings;
}

/** The exit status of a backup stopped by a signal (128 + SIGINT's number, as shells report). */
const EXIT_INTERRUPTED = 130;

/**
 * Copies the records and the secrets into `draft`, each file owner-only and synced; also tells
 * why this version's daemon would refuse the records (their format marker), if it would.
 */
async function fillDraft(
  dataDir: string,
  draft: string,
): Promise<{ written: BackupFile[]; formatProblem: ReturnType<typeof storeFormatProblem> }> {
  await mkdir(path.join(draft, RECORDS_DIRECTORY), { mode: 0o700 });
  const formatProblem = await copyRecords(
    path.join(dataDir, RECORDS_DIRECTORY),
    path.join(draft, RECORDS_DIRECTORY),
  );
  const files = [RECORDS_FILE];
  for (const secret of [ADMIN_TOKEN_FILE, IDENTITY_KEY_FILE]) {
    if (await copyIfPresent(path.join(dataDir, secret), path.join(draft, secret))) {
      files.push(secret);
    }
  }
  const written: BackupFile[] = [];
  for (const file of files) {
    const full = path.join(draft, file);
    await chmod(full, 0o600);
    await sync(full);
    written.push({ file, bytes: (await stat(full)).size });
  }
  await sync(path.join(draft, RECORDS_DIRECTORY));
  await sync(draft);
  return { written, formatProblem };
}

/**
 * The records environment's consistent copy, opened read-only beside the running daemons (LMDB
 * shares an environment between processes) as the daemon opens it: a lock file this open
 * creates, in a store no daemon has opened yet (a backup of a backup), is owner-only too. The
 * store, and lmdb with it, is loaded here, by this command only.
 */
async function copyRecords(
  source: string,
  directory: string,
): Promise<ReturnType<typeof storeFormatProblem>> {
  const { openEnvironment, openMeta, storedFormat } = await import("#daemon/store/lmdb-store.js");
  const environment = openEnvironment({ path: source, readOnly: true });
  try {
    // The environment has a directory of its own, so LMDB writes data.mdb into `directory`.
    await environment.backup(directory, true);
    // Copied whole whatever it holds; a store this version's daemon refuses is said so.
    return storeFormatProblem(storedFormat(openMeta(environment)));
  } finally {
    await environment.close();
  }
}

/** Whether `inner` lies inside the directory `outer`, symbolic links followed. */
async function liesWithin(inner: string, outer: string): Promise<boolean> {
  const relative = path.relative(await realpath(outer), await realpath(inner));
  return relative !== "" && !relative.startsWith("..") && !path.isAbsolute(relative);
}

async function copyIfPresent(from: string, to: string): Promise<boolean> {
  try {
    await copyFile(from, to, constants.COPYFILE_EXCL);
    return true;
  } catch (error) {
    if (isCode(error, "ENOENT")) return false;
    throw error;
  }
}

/** Flushes a file or a directory's entries to disk. */
async function sync(file: string): Promise<void> {
  const handle = await open(file, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Whether `file` exists; a path that cannot be looked at is the operator's to mend. */
async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch (error) {
    if (isCode(error, "ENOENT")) return false;
    throw new UserError(
      `Cannot look at ${file}: ${reason(file, error, "read")}.`,
      "check the path, and that this user may read the directories on it",
      "backup_failed",
    );
  }
}

/** A file system failure in words, as every command says it (the hints here are the backup's). */
function reason(file: string, error: unknown, access: "read" | "write"): string {
  return fileFailure(file, error, access, "").reason;
}

function isCode(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}
