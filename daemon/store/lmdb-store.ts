import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type Database, open, type RootDatabase, type RootDatabaseOptionsWithPath } from "lmdb";
import { createLmdbBannerStore } from "#daemon/banners/lmdb-banner-store.js";
import type { ConsentLogRecord } from "#daemon/consent-log/consent-log-store.js";
import { createLmdbConsentLogStore } from "#daemon/consent-log/lmdb-consent-log-store.js";
import { createLmdbKeyStore } from "#daemon/keys/lmdb-key-store.js";
import { createLmdbCounterStore } from "#daemon/limits/lmdb-counter-store.js";
import { createLmdbSessionStore } from "#daemon/sessions/lmdb-session-store.js";
import { type DiskGuard, type DiskGuardOptions, watchFreeSpace } from "#daemon/store/disk-guard.js";
import { COUNTERS_DIRECTORY, RECORDS_DIRECTORY } from "#daemon/store/lmdb-files.js";
import { checkStoreFormat, type Store } from "#daemon/store/store.js";
import { createLmdbSubjectStore } from "#daemon/subjects/lmdb-subject-store.js";
import { createLmdbTeamStore } from "#daemon/teams/lmdb-team-store.js";
import {
  createLmdbWebhookStore,
  indexEarlierLeases,
  type LmdbWebhookDatabases,
  type OutboxEntry,
} from "#daemon/webhooks/lmdb-webhook-store.js";

export interface LmdbStoreOptions {
  /** Directory holding the environments; created when missing. Several daemons may share it. */
  dataDir: string;
  /**
   * Writes to the records are refused (StoreFullError) while the disk has fewer free bytes than
   * this (disk-guard.ts); 0, the default, never refuses. The daemon passes CONSENT_MIN_FREE_MB.
   */
  minFreeBytes?: number;
  /** Told when the store starts refusing writes for want of room, and when it stops (disk-guard.ts). */
  onRoomChange?: DiskGuardOptions["onChange"];
  /** Told once, when a call first meets a damaged page (see `reportDamage` of the Store port). */
  onDamage?: (reason: string) => void;
  /**
   * How long one read of the consent log (a listing, a count, a page of an export or a tail) may
   * run before it stops with LogReadTooLargeError; default 10 s. The daemon passes
   * CONSENT_LOG_READ_TIMEOUT_MS.
   */
  logReadLimitMs?: number;
}

/**
 * Modes of what the store creates: owner-only, whatever the umask or the data directory's own
 * mode (an operator may have made it beforehand, readable by others). The records hold webhook
 * signing secrets and the digests of keys and sessions. Files and directories that already exist
 * keep their mode (README, "Running the parts separately").
 */
const DIRECTORY_MODE = 0o700;
const FILE_MODE = 0o600;

/**
 * Opens an environment whose files are created owner-only. lmdb reads `permissionsMode` (the
 * mode mdb_env_open creates the data and lock files with; 0664 when absent) though its types do
 * not list it.
 */
export function openEnvironment(options: RootDatabaseOptionsWithPath): RootDatabase {
  return open({ ...options, permissionsMode: FILE_MODE } as RootDatabaseOptionsWithPath);
}

/**
 * The records' `meta` database: their format marker, and the marks of indexes built at a first
 * open. A store no daemon of this version has opened has none, which an environment opened
 * read-only (a backup's) cannot create: lmdb-js then gives no database at all.
 */
export function openMeta(records: RootDatabase): Database<unknown, string> | undefined {
  return records.openDB<unknown, string>({ name: "meta" }) as Database<unknown, string> | undefined;
}

/** The records' format marker (store.ts, STORE_FORMAT), from their `meta`: undefined when none. */
export function storedFormat(meta: Database<unknown, string> | undefined): unknown {
  return meta?.get("format");
}

/**
 * Opens the durable records environment, `<dataDir>/records`. overlappingSync is off so that LMDB
 * fsyncs inside every commit: a write's promise then resolves only once the data is on disk, and
 * no other process can see data that a crash could still take back. The alternative, awaiting
 * `db.flushed` after each write, keeps the fsync out of the writer lock but makes every write
 * site responsible for the wait. No `cache`: another process's writes must be seen at once.
 */
function openRecords(dataDir: string): RootDatabase {
  return absentUnstorableKeys(
    openEnvironment({
      path: join(dataDir, RECORDS_DIRECTORY),
      overlappingSync: false,
      maxDbs: 32,
    }),
  );
}

/** The UTF-8 bytes of a key's strings, up to `limit` and a little past it. */
function keyBytesBeyond(key: unknown, limit: number): boolean {
  let total = 0;
  for (const part of Array.isArray(key) ? key : [key]) {
    if (typeof part !== "string") continue;
    // Three bytes per UTF-16 unit at most: a short string is counted without encoding it.
    total += part.length * 3 <= limit ? part.length * 3 : Buffer.byteLength(part);
    if (total > limit) return true;
  }
  return false;
}

/**
 * Reads by a key longer than LMDB stores (its maxKeySize, 1,978 bytes) answer "absent": no record
 * can have such a key, and lmdb would throw instead ("String does not fit in target buffer" past
 * 4 KB), so a request naming a 5,000-character id would fail as an internal error rather than be
 * not_found as any unknown id is. Point reads (get, doesExist, getBinary, getString) all pass through
 * getBinaryFast or getString, wrapped here on the root and on every database opened from it.
 * Writes keep lmdb's refusal: the store writes only keys it makes.
 */
function absentUnstorableKeys(root: RootDatabase): RootDatabase {
  const limit = (root as unknown as { maxKeySize?: number }).maxKeySize ?? 1978;
  const wrap = (db: object) => {
    const methods = db as Record<string, (...args: unknown[]) => unknown>;
    for (const name of ["getBinaryFast", "getString"]) {
      const read = methods[name];
      if (typeof read !== "function") continue;
      methods[name] = function (this: unknown, key: unknown, ...rest: unknown[]) {
        if (keyBytesBeyond(key, limit)) return undefined;
        return read.call(this, key, ...rest);
      };
    }
  };
  return onEveryDatabase(root, wrap);
}

/** Applies `change` to an environment's root and to every database opened from it later. */
function onEveryDatabase(root: RootDatabase, change: (db: object) => void): RootDatabase {
  change(root);
  const openDB = root.openDB.bind(root);
  root.openDB = ((...args: Parameters<typeof openDB>) => {
    const db = openDB(...args);
    change(db);
    return db;
  }) as typeof root.openDB;
  return root;
}

/**
 * lmdb's methods that write: `promise`, whether one answers with a promise (else at once);
 * `callback`, whether its first argument runs inside the transaction.
 */
const WRITES: Record<string, { promise: boolean; callback?: true }> = {
  put: { promise: true },
  remove: { promise: true },
  del: { promise: true },
  ifNoExists: { promise: true },
  ifVersion: { promise: true },
  batch: { promise: true },
  drop: { promise: true },
  clearAsync: { promise: true },
  transaction: { promise: true, callback: true },
  childTransaction: { promise: true, callback: true },
  transactionAsync: { promise: true, callback: true },
  putSync: { promise: false },
  removeSync: { promise: false },
  dropSync: { promise: false },
  clearSync: { promise: false },
  transactionSync: { promise: false, callback: true },
};

/**
 * The writes the disk guard lets through: revocations and removals. However little room is
 * left, a compromised key or session can be revoked, a subject's state erased (spec 4.7), a
 * webhook endpoint removed with its deliveries, and purge can free pages for later writes. A
 * revocation rewrites a few pages; a removal, however large, frees more pages than it writes
 * (LMDB reuses the freed ones), so the file hardly grows into the room CONSENT_MIN_FREE_MB
 * keeps. Each method starts its transaction before it first awaits, so the exemption reaches it
 * (guardRecordWrites); a method that awaited first would have its write refused, which the store's
 * test of these writes under a refusing guard catches for each one listed here.
 */
const EXEMPT_WRITES = {
  keys: ["revoke"],
  sessions: ["revoke", "purgeExpired"],
  subjects: ["delete", "purgeExpired"],
  webhooks: ["deleteEndpoint"],
} as const;

/** Runs the sub-stores' EXEMPT_WRITES inside guard.exempting(). */
function exemptWrites(store: Store, guard: DiskGuard) {
  for (const [part, names] of Object.entries(EXEMPT_WRITES)) {
    const subStore = store[part as keyof typeof EXEMPT_WRITES] as unknown as Record<
      string,
      (...args: unknown[]) => unknown
    >;
    for (const name of names) {
      const method = subStore[name] as (...args: unknown[]) => unknown;
      subStore[name] = (...args: unknown[]) => guard.exempting(() => method.apply(subStore, args));
    }
  }
}

/**
 * The records environment with every write, on it and on each database opened from it, checked
 * against the disk guard first: a refused write fails as that method fails, a rejected promise or
 * a throw. The counters environment is not guarded: refusing its writes would refuse every
 * request, reads included, and its pages are reused as windows expire, so it hardly grows.
 */
function guardRecordWrites(records: RootDatabase, guard: DiskGuard): RootDatabase {
  const guardWrites = (db: object) => {
    const methods = db as Record<string, (...args: unknown[]) => unknown>;
    for (const [name, kind] of Object.entries(WRITES)) {
      const write = methods[name];
      if (typeof write !== "function") continue;
      methods[name] = function (this: unknown, ...args: unknown[]) {
        try {
          guard.assertRoom();
        } catch (error) {
          if (kind.promise) return Promise.reject(error);
          throw error;
        }
        // An exempt write's transaction callback runs later, in lmdb's batch: exempt too.
        const [callback] = args;
        if (guard.exempt && kind.callback && typeof callback === "function") {
          args[0] = (...inner: unknown[]) => guard.exempting(() => callback(...inner));
        }
        return write.apply(this, args);
      };
    }
  };
  return onEveryDatabase(records, guardWrites);
}

/**
 * Opens the rate-limit environment, `<dataDir>/counters`, without fsync (noSync): a machine crash
 * may lose recent counts, but the hot path never waits for the disk. A separate environment, since
 * sync behaviour is per environment and the records must stay durable.
 */
function openCounters(dataDir: string): RootDatabase {
  return openEnvironment({ path: join(dataDir, COUNTERS_DIRECTORY), noSync: true, maxDbs: 4 });
}

/**
 * The embedded default Store: LMDB environments in `dataDir`, safe to open from several processes
 * at once (LMDB serialises write transactions across processes through its lock file).
 */
export async function openLmdbStore(options: LmdbStoreOptions): Promise<Store> {
  observeBatchFailures();
  for (const directory of [RECORDS_DIRECTORY, COUNTERS_DIRECTORY]) {
    await mkdir(join(options.dataDir, directory), { recursive: true, mode: DIRECTORY_MODE });
  }
  const guard = await watchFreeSpace({
    directory: join(options.dataDir, RECORDS_DIRECTORY),
    minFreeBytes: options.minFreeBytes ?? 0,
    onChange: options.onRoomChange,
  });
  // Without a guard (CONSENT_MIN_FREE_MB=0) lmdb's write methods are left as they are.
  const records = guard
    ? guardRecordWrites(openRecords(options.dataDir), guard)
    : openRecords(options.dataDir);
  let counterEnv: RootDatabase;
  try {
    counterEnv = openCounters(options.dataDir);
  } catch (error) {
    await records.close();
    throw error;
  }
  // A process that ended inside a read transaction (killed, or a consentctl backup stopped with
  // Ctrl-C) leaves its reader slot in the lock file, and no page it could see is reused until
  // someone clears it: lmdb does at open, and each daemon does every minute, so the file does
  // not grow for a dead reader's sake.
  const readers = setInterval(() => {
    try {
      records.readerCheck();
      counterEnv.readerCheck();
    } catch {
      // An environment failing here fails its next request as well, where it is reported.
    }
  }, READER_CHECK_EVERY_MS);
  readers.unref();
  let meta: Database<unknown, string>;
  try {
    // Opened read-write, the records create their `meta` when they have none.
    meta = openMeta(records) as Database<unknown, string>;
    checkStoreFormat(storedFormat(meta));
  } catch (error) {
    clearInterval(readers);
    await Promise.all([records.close(), counterEnv.close()]);
    throw error;
  }
  // The consent log and the webhook store share the outbox: append writes it, the dispatcher reads it.
  const consentLog = records.openDB<ConsentLogRecord, [string, string]>({ name: "consent-log" });
  const webhookOutbox = records.openDB<OutboxEntry, string>({ name: "webhook-outbox" });
  const webhookDatabases: LmdbWebhookDatabases = {
    webhookEndpoints: records.openDB({ name: "webhook-endpoints" }),
    webhookEndpointIdsByTeam: records.openDB({ name: "webhook-endpoint-ids-by-team" }),
    webhookOutbox,
    consentLog,
    webhookDeliveries: records.openDB({ name: "webhook-deliveries" }),
    webhookDeliveryIdsByEndpoint: records.openDB({ name: "webhook-delivery-ids-by-endpoint" }),
    webhookDeliveriesDue: records.openDB({ name: "webhook-deliveries-due" }),
    webhookDeliveryLeases: records.openDB({ name: "webhook-delivery-leases" }),
  };
  let closed = false;
  let damage: string | undefined;
  const metDamage = (reason: string) => {
    if (damage !== undefined) return;
    damage = reason;
    options.onDamage?.(reason);
  };
  const store: Store = {
    kind: "lmdb",
    teams: createLmdbTeamStore({ teams: records.openDB({ name: "teams" }) }),
    keys: createLmdbKeyStore({
      keys: records.openDB({ name: "keys" }),
      keyIdsByHash: records.openDB({ name: "key-ids-by-hash" }),
      keyIdsByTeam: records.openDB({ name: "key-ids-by-team" }),
    }),
    sessions: createLmdbSessionStore({
      sessions: records.openDB({ name: "sessions" }),
      sessionIdsByHash: records.openDB({ name: "session-ids-by-hash" }),
      sessionIdsByExpiry: records.openDB({ name: "session-ids-by-expiry" }),
    }),
    banners: createLmdbBannerStore({
      banners: records.openDB({ name: "banners" }),
      bannerIdsByPublicId: records.openDB({ name: "banner-ids-by-public-id" }),
      bannerIdsByTeam: records.openDB({ name: "banner-ids-by-team" }),
    }),
    subjects: createLmdbSubjectStore({
      subjects: records.openDB({ name: "subjects" }),
      subjectHashesByExpiry: records.openDB({ name: "subject-hashes-by-expiry" }),
    }),
    consentLog: createLmdbConsentLogStore(
      {
        consentLog,
        consentLogTeamsById: records.openDB({ name: "consent-log-teams-by-id" }),
        consentLogIdsByConsentId: records.openDB({ name: "consent-log-ids-by-consent-id" }),
        webhookOutbox,
      },
      { logReadLimitMs: options.logReadLimitMs },
    ),
    webhooks: createLmdbWebhookStore(webhookDatabases),
    counters: createLmdbCounterStore({
      counters: counterEnv.openDB({ name: "counters" }),
      counterNamesByExpiry: counterEnv.openDB({ name: "counter-names-by-expiry" }),
    }),
    acceptsWrites: () => !guard?.refusing,
    startWarnings: [],
    unavailability: () => undefined,
    isDamage: (error) =>
      damageOf(error) !== undefined ||
      (error instanceof Error && damageOf(error.cause) !== undefined),
    reportDamage(reason) {
      damage ??= reason;
    },
    // lmdb keeps one read snapshot for the reads of a moment (until a timer of its own), so a
    // read right after another process's write was reported could still be served from before it.
    refreshReads() {
      records.resetReadTxn();
    },
    // A one-key read of each environment's root (its catalogue of named databases): cheap, and it
    // throws once the environment is closed. Pages deeper in the files are read by the requests
    // that need them; once one has been found damaged, the store no longer answers.
    async ping() {
      if (damage !== undefined) throw new Error(`the embedded store is damaged: ${damage}`);
      Array.from(records.getKeys({ limit: 1 }));
      Array.from(counterEnv.getKeys({ limit: 1 }));
    },
    async close() {
      closed = true;
      guard?.close();
      clearInterval(readers);
      await Promise.all([records.close(), counterEnv.close()]);
    },
  };
  if (guard) exemptWrites(store, guard);
  // The lease index of a store an earlier version wrote, built at its first open by this one:
  // exempt from the disk guard, as it writes once, one entry per leased pending delivery.
  const indexing = () => indexEarlierLeases(webhookDatabases, meta);
  try {
    await (guard ? guard.exempting(indexing) : indexing());
  } catch (error) {
    await store.close();
    throw error;
  }
  const parts = store as unknown as Record<(typeof SUB_STORES)[number], object>;
  for (const part of SUB_STORES) {
    parts[part] = refusingAfterClose(parts[part], () => closed, metDamage);
  }
  return store;
}

/** How often stale reader slots are cleared (readerCheck). */
const READER_CHECK_EVERY_MS = 60_000;

const SUB_STORES = [
  "teams",
  "keys",
  "sessions",
  "banners",
  "subjects",
  "consentLog",
  "webhooks",
  "counters",
] as const;

/**
 * After close() every call of the sub-store rejects with a plain error. lmdb-js would instead
 * throw a write on a closed environment from its write scheduler, where no caller can catch it,
 * and leave the caller's promise pending for ever (a dispatcher pass, a request in a drain).
 * A failed commit is handed to the caller whole (see observeCommitFailure).
 */
function refusingAfterClose<T extends object>(
  subStore: T,
  isClosed: () => boolean,
  onDamage: (reason: string) => void,
): T {
  const guarded = { ...subStore } as Record<string, unknown>;
  const damaged = (error: unknown) => {
    const reason = damageOf(error);
    if (reason !== undefined) onDamage(reason);
  };
  // A write that met damage fails as "Commit failed"; its reason comes later, on commitError.
  const failed = (error: unknown): never => {
    damaged(error);
    return observeCommitFailure(error, damaged);
  };
  for (const [name, member] of Object.entries(subStore)) {
    if (typeof member !== "function") continue;
    guarded[name] = (...args: unknown[]) => {
      if (isClosed()) return Promise.reject(new Error("the embedded store is closed"));
      return Promise.resolve(member.apply(subStore, args)).catch(failed);
    };
  }
  return guarded as T;
}

/**
 * LMDB's errors for a page that is not what the tree says it is: the files were damaged (a disk
 * fault, a copy cut short or written over) deeper than the start-up probe reads (lmdb-preflight.ts).
 * MDB_BAD_TXN is the one a read meets when a page it follows is zeros (lmdb-js prints "index
 * points to a 00 page" and marks the transaction failed), and every read after it fails alike.
 */
const DAMAGE = /^MDB_(?:CORRUPTED|PAGE_NOTFOUND|PROBLEM|PANIC|BAD_TXN)\b/;

/** The LMDB error's own words when `error` says the files are damaged, else undefined. */
export function damageOf(error: unknown): string | undefined {
  const message = error instanceof Error ? error.message : undefined;
  return message !== undefined && DAMAGE.test(message) ? message : undefined;
}

/** lmdb-js's error for a failed commit: the reason (EIO, EFBIG, MDB_MAP_FULL …) is a promise. */
type CommitFailure = Error & { commitError: Promise<unknown> };

function isCommitFailure(reason: unknown): reason is CommitFailure {
  return (
    reason instanceof Error && (reason as Partial<CommitFailure>).commitError instanceof Promise
  );
}

/**
 * When a commit fails (a full disk, an I/O error, the file size limit), lmdb-js rejects the
 * caller's write with "Commit failed (see commitError for details)" and rejects two more promises
 * of its own that nothing observes: the reason, kept on the error as `commitError`, and its write
 * batch's. Node ends a process on an unobserved rejection, so one failed write would take every
 * other request down with it. The caller's error gets the reason as its `cause` instead, and
 * `onCause` hears it (a write that met damage says so only there).
 */
function observeCommitFailure(error: unknown, onCause: (cause: unknown) => void): never {
  if (isCommitFailure(error)) {
    error.commitError.catch((cause: unknown) => {
      error.cause ??= cause;
      onCause(cause);
    });
  }
  throw error;
}

let batchFailuresObserved = false;

/**
 * The other unobserved rejection of a failed commit (the write batch's, which no caller holds) is
 * marked handled here, once per process; the caller has its own error for the same failure.
 * Every other unobserved rejection still ends the process, as Node's default does.
 */
function observeBatchFailures(): void {
  if (batchFailuresObserved) return;
  batchFailuresObserved = true;
  process.on("unhandledRejection", (reason) => {
    if (!isCommitFailure(reason)) throw reason;
    reason.commitError.catch(() => undefined);
  });
}
