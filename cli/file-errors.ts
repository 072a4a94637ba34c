import { existsSync } from "node:fs";
import path from "node:path";

/** Why a file could not be read or written, in words, with what the operator can do about it. */
export interface FileFailure {
  reason: string;
  hint: string;
}

/**
 * Node's file system error (ENOENT, EISDIR, EACCES…) in words, for a message that names `file`.
 * `access` is what was attempted: a file being written is created, so its ENOENT means that
 * the directory it goes in does not exist, not the file itself.
 */
export function fileFailure(
  file: string,
  error: unknown,
  access: "read" | "write",
  fallbackHint: string,
): FileFailure {
  switch ((error as NodeJS.ErrnoException).code) {
    case "ENOENT": {
      if (access === "read") return { reason: "it does not exist", hint: fallbackHint };
      const directory = path.dirname(path.resolve(file));
      // A directory that exists but takes no new file (/proc), or a link to one that does not.
      return existsSync(directory)
        ? {
            reason: `no file can be created there (${directory} takes none, or a link points nowhere)`,
            hint: "name a file in a directory of your own",
          }
        : {
            reason: `the directory ${directory} does not exist`,
            hint: "create the directory first, or name a file in one that exists",
          };
    }
    case "ENOTDIR":
      return {
        reason: "a part of the path is a file, not a directory",
        hint: "check the path for a file named where a directory should be",
      };
    case "EISDIR":
      return {
        reason: "it is a directory",
        hint: access === "read" ? fallbackHint : "name a file, in that directory or another",
      };
    case "EACCES":
    case "EPERM":
      return {
        reason: "permission denied",
        hint: `check the permissions of the file and its directory, or ${access === "read" ? "read" : "write"} it as a user who may`,
      };
    case "EROFS":
      return { reason: "the file system is read-only", hint: "write it somewhere else" };
    case "ENOSPC":
    case "EDQUOT":
      return { reason: "the disk is full", hint: "free space on that disk, or write elsewhere" };
    default:
      return { reason: (error as Error).message ?? String(error), hint: fallbackHint };
  }
}
