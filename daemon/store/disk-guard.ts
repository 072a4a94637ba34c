import { statfs } from "node:fs/promises";
import { Code, ConnectError } from "@connectrpc/connect";

/**
 * Thrown instead of a write to the embedded store while the guard refuses writes (its disk has
 * less free space than CONSENT_MIN_FREE_MB, or has not yet regained a quarter more). The request fails like any refused write (500, nothing acknowledged); the
 * guard reports the state itself, once when it starts refusing and once when it stops, so a full
 * disk does not add a log entry per request.
 */
export class StoreFullError extends Error {
  override name = "StoreFullError";
}

/**
 * Metadata of the internal error that answers a write the disk guard refused (set by the daemon's
 * error interceptor, daemon/rpc/connect-errors.ts). The gateway answers it like any internal
 * error, 500, but does not log it: the daemon has reported the full disk once, and a line per
 * request would only add to what fills it.
 */
export const STORE_FULL_METADATA = "consent-store-full";

/**
 * Whether `error` is a write refused for want of disk space: the store's own StoreFullError, or
 * the daemon's answer to one (in this process or another).
 */
export function isStoreFull(error: unknown): boolean {
  if (error instanceof StoreFullError) return true;
  return (
    error instanceof ConnectError &&
    error.code === Code.Internal &&
    error.metadata.get(STORE_FULL_METADATA) === "1"
  );
}

/** How often the free space is measured. */
const MEASURE_EVERY_MS = 1_000;

export interface DiskGuardOptions {
  /** A directory on the disk to watch (the records environment's). */
  directory: string;
  /** Writes are refused while fewer bytes than this are free; 0 never refuses. */
  minFreeBytes: number;
  /**
   * Told when the guard starts refusing writes (`refusing` true, `message` the refusal as then
   * measured) and when it stops (`message` says how much room there is again).
   */
  onChange?: (refusing: boolean, message: string) => void;
}

export interface DiskGuard {
  /** Throws StoreFullError while the guard refuses writes, unless inside exempting(). */
  assertRoom(): void;
  /** Whether writes are refused (exempt ones aside). */
  readonly refusing: boolean;
  /** Whether the caller runs inside exempting(). */
  readonly exempt: boolean;
  /**
   * Runs `run` with the check lifted, for the writes that must never wait for room (the
   * store's revocations and removals, lmdb-store.ts). Only what `run` does before it returns is
   * exempt; the store carries the exemption into the transaction callbacks it starts.
   */
  exempting<T>(run: () => T): T;
  /** Stops measuring. */
  close(): void;
}

/** The most room past the minimum a refusing guard waits for. */
const RESUME_MARGIN_CAP = 256 * 1024 * 1024;

/**
 * Whether the guard refuses writes after a measurement of `freeBytes`. Once refusing, it accepts
 * again only when a quarter of the minimum more is free (at most 256 MB more), so free space
 * hovering at the threshold does not turn the store on and off, and log a line, every second.
 */
export function refusesWrites(refusing: boolean, freeBytes: number, minFreeBytes: number): boolean {
  return freeBytes < (refusing ? resumeBytes(minFreeBytes) : minFreeBytes);
}

/** The free space at which a refusing guard accepts writes again. */
function resumeBytes(minFreeBytes: number): number {
  return minFreeBytes + Math.min(Math.ceil(minFreeBytes / 4), RESUME_MARGIN_CAP);
}

/**
 * Keeps the embedded store off a full disk, or undefined when `minFreeBytes` is 0 (no guard).
 * lmdb (3.5.6) overflows a heap buffer when a page write fails for want of room, and the process
 * may then abort (docs/behaviour.md, "Bodies and errors"); refusing writes a little before the
 * disk is full keeps it from getting there. The free space (what an unprivileged process may
 * use, statfs `bavail`) is measured at start and then every second on a timer that never keeps
 * the process alive; the check a write makes reads the last measurement, so no write waits for a
 * system call.
 */
export async function watchFreeSpace(options: DiskGuardOptions): Promise<DiskGuard | undefined> {
  const { directory, minFreeBytes, onChange } = options;
  if (minFreeBytes <= 0) return undefined;
  const measure = async () => {
    const stats = await statfs(directory);
    return stats.bavail * stats.bsize;
  };
  const free = (bytes: number) => `the data directory's disk has ${megabytes(bytes)} MB free`;
  /** What a refused write says, from the last measurement; undefined while writes are accepted. */
  let refusal: string | undefined;
  const update = (bytes: number) => {
    const wasRefusing = refusal !== undefined;
    const refusing = refusesWrites(wasRefusing, bytes, minFreeBytes);
    // Each measurement while refusing rewords the refusal, so it always gives the current room.
    refusal = !refusing
      ? undefined
      : bytes < minFreeBytes
        ? `${free(bytes)}, below CONSENT_MIN_FREE_MB (${megabytes(minFreeBytes)} MB): the embedded store refuses writes until there is room`
        : `${free(bytes)}, short of the ${megabytes(resumeBytes(minFreeBytes))} MB at which the embedded store accepts writes again (CONSENT_MIN_FREE_MB plus a quarter)`;
    if (refusing !== wasRefusing) {
      onChange?.(refusing, refusal ?? `${free(bytes)} again: writes are accepted`);
    }
  };
  update(await measure());
  let exemptDepth = 0;

  let measuring = false;
  const timer = setInterval(() => {
    if (measuring) return;
    measuring = true;
    measure()
      .then(update)
      // The directory gone or unreadable: keep the last measurement, try again next time.
      .catch(() => {})
      .finally(() => {
        measuring = false;
      });
  }, MEASURE_EVERY_MS);
  timer.unref();

  return {
    assertRoom() {
      if (refusal !== undefined && exemptDepth === 0) throw new StoreFullError(refusal);
    },
    get refusing() {
      return refusal !== undefined;
    },
    get exempt() {
      return exemptDepth > 0;
    },
    exempting(run) {
      exemptDepth++;
      try {
        return run();
      } finally {
        exemptDepth--;
      }
    },
    close() {
      clearInterval(timer);
    },
  };
}

function megabytes(bytes: number): number {
  return Math.floor(bytes / (1024 * 1024));
}
