/**
 * A log line of the daemon as a test reads it: a warning of the store out of reach names its
 * error as `storeError` (no stack), any other failure's line as `err`.
 */
export interface FailureLine {
  level: number;
  msg: string;
  storeError?: { message: string };
  err?: { message: string };
}

/** Each line's level, message and the message of the failure it names. */
export function failureWords(lines: readonly FailureLine[]): unknown[][] {
  return lines.map(({ level, msg, storeError, err }) => [level, msg, (storeError ?? err)?.message]);
}
