import type { Abortable } from "mongodb";
import type { ReadCancellation } from "#daemon/store/store.js";

/**
 * Runs `read` with the driver's option that stops it when its call is cancelled
 * (ReadCancellation): the call's signal, read only now that the read is about to reach MongoDB.
 * Aborted before a command is sent, the read sends none; aborted while a command's reply is
 * awaited, the driver closes the connection, on which the server kills the command (MongoDB stops
 * a find or an aggregate whose client has disconnected), and the pool opens another when one is
 * next needed; aborted while a cursor's getMore is under way (the driver gives a getMore no
 * signal), the driver kills the cursor (killCursors), and the server answers the getMore with
 * CursorKilled. A read so stopped fails with the signal's reason, whatever the driver met
 * stopping it: the caller gone (CANCELED), its deadline (DEADLINE_EXCEEDED) or the daemon
 * stopping (UNAVAILABLE), as the RPC edge answers it (rpc/connect-errors.ts).
 */
export async function cancellableRead<T>(
  cancel: ReadCancellation | undefined,
  read: (options: Abortable) => Promise<T>,
): Promise<T> {
  if (cancel === undefined) return read({});
  const signal = cancel.signal;
  try {
    return await read({ signal });
  } catch (error) {
    signal.throwIfAborted();
    throw error;
  }
}
