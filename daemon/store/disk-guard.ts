import { statfs } from "node:fs/promises";

/**
 * Thrown instead of a write to the embedded store while its disk has less free space than
 * CONSENT_MIN_FREE_MB. The request fails like any refused write (500, nothing acknowledged); the
 * guard reports the state itself, once when it starts refusing and once when it stops, so a full
 * disk does not add a log entry per request.
 */
export class StoreFullError extends Error {
  override name = "StoreFullError";
}

/** How often the free space is measured again (lazily, on a write after this long). */
const MEASURE_EVERY_MS = 1_000;

export interface DiskGuardOptions {
  /** A directory on the disk to watch (the data directory). */
  directory: string;
  /** Writes are refused while fewer bytes than this are free; 0 never refuses. */
  minFreeBytes: number;
  /** Told when the guard starts refusing writes (`refusing` true) and when it stops. */
  onChange?: (refusing: boolean, freeBytes: number) => void;
  /** Monotonic milliseconds (tests may drive it). */
  now?: () => number;
}

export interface DiskGuard {
  /** Throws StoreFullError while the last measured free space is below the minimum. */
  assertRoom(): void;
}

/**
 * Keeps the embedded store off a full disk. lmdb (3.5.6) overflows a heap buffer when a page
 * write fails for want of room, and the process may then abort (docs/behaviour.md, "Bodies and
 * errors"); refusing writes a little before the disk is full keeps it from getting there. The
 * check is synchronous and reads the last measurement, so a write waits for no system call; a
 * write more than a second after the last measurement starts the next one. The free space counted
 * is what an unprivileged process may use (statfs `bavail`).
 */
export async function watchFreeSpace(options: DiskGuardOptions): Promise<DiskGuard> {
  const { directory, minFreeBytes, onChange } = options;
  if (minFreeBytes <= 0) return { assertRoom() {} };
  const now = options.now ?? (() => performance.now());
  const measure = async () => {
    const stats = await statfs(directory);
    return stats.bavail * stats.bsize;
  };
  let freeBytes = await measure();
  let measuredAt = now();
  let measuring = false;
  let refusing = freeBytes < minFreeBytes;
  if (refusing) onChange?.(true, freeBytes);

  const remeasure = () => {
    measuring = true;
    measure()
      .then((bytes) => {
        freeBytes = bytes;
        const low = bytes < minFreeBytes;
        if (low !== refusing) {
          refusing = low;
          onChange?.(low, bytes);
        }
      })
      // The directory gone or unreadable: keep the last measurement, try again later.
      .catch(() => {})
      .finally(() => {
        measuredAt = now();
        measuring = false;
      });
  };

  return {
    assertRoom() {
      if (!measuring && now() - measuredAt >= MEASURE_EVERY_MS) remeasure();
      if (refusing) {
        throw new StoreFullError(
          `the data directory's disk has ${megabytes(freeBytes)} MB free, below CONSENT_MIN_FREE_MB (${megabytes(minFreeBytes)} MB): writes are refused until there is room`,
        );
      }
    },
  };
}

function megabytes(bytes: number): number {
  return Math.floor(bytes / (1024 * 1024));
}
