import http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { deadlinePassed } from "#daemon/rpc/call-deadline.js";
import type { AbortableCall, CallerPresence } from "#daemon/rpc/caller-presence.js";
import { busy, lost, Refused, tooLarge, unreachable } from "#gateway/daemon-failures.js";

const {
  HTTP2_HEADER_STATUS,
  HTTP2_HEADER_CONTENT_LENGTH,
  NGHTTP2_CANCEL,
  NGHTTP2_ENHANCE_YOUR_CALM,
  NGHTTP2_NO_ERROR,
  NGHTTP2_REFUSED_STREAM,
} = http2.constants;

/** A request as sent on the wire, with the bounds of its answer. */
export interface Call {
  headers: http2.OutgoingHttpHeaders;
  body: Uint8Array;
  readMaxBytes: number;
  signal: AbortSignal | undefined;
  /** The REST client of a read, whose leaving cancels the call (caller-presence.ts). */
  presence: CallerPresence | undefined;
  timeoutMs: number | undefined;
}

/** A response as read off the wire. */
export interface Reply {
  status: number;
  /** The header fields as Node reads them, pseudo-headers (`:status`) included. */
  header: http2.IncomingHttpHeaders;
  body: Uint8Array;
}

/** Fails a call in flight at once (the gateway's shutdown giving its calls up). */
export type FailCall = (error: Error) => void;

/** What is read of an answer so far. */
interface Answer {
  status: number;
  header: http2.IncomingHttpHeaders | undefined;
  declaredLength: number | undefined;
  chunks: Buffer[];
  received: number;
  settled: boolean;
}

/**
 * Sends `call` on a stream just opened and reads its whole answer: what the HTTP/2 stream's events
 * mean for one unary call, apart from which connection carries it (daemon-connection.ts). The call
 * is in `inFlight` until it settles, then `onSettled` is told, before the promise settles. It fails
 * with the call's abort, its REST client leaving, or its deadline, with INTERNAL past
 * `readMaxBytes`, with Refused when the daemon refused it unprocessed (it may go again), busy when
 * the daemon is over its request budget, and UNAVAILABLE when the answer is cut short; a failed
 * call's stream is cancelled.
 */
export function readReply(
  stream: http2.ClientHttp2Stream,
  call: Call,
  inFlight: Set<FailCall>,
  onSettled: () => void,
): Promise<Reply> {
  const { signal, presence, timeoutMs } = call;
  return new Promise<Reply>((resolve, reject) => {
    const answer: Answer = {
      status: 0,
      header: undefined,
      declaredLength: undefined,
      chunks: [],
      received: 0,
      settled: false,
    };
    let timer: NodeJS.Timeout | undefined;
    let watched: AbortableCall | undefined;
    const finish = (error: Error | undefined) => {
      if (answer.settled) return;
      answer.settled = true;
      inFlight.delete(finish);
      if (timer) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if (watched) presence?.unwatch(watched);
      onSettled();
      if (error) {
        if (!stream.closed) stream.close(NGHTTP2_CANCEL);
        reject(error);
        return;
      }
      const { chunks, received } = answer;
      resolve({
        status: answer.status,
        header: answer.header ?? {},
        body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received),
      });
    };
    inFlight.add(finish);
    const onAbort = () => finish(ConnectError.from(signal?.reason, Code.Canceled));
    signal?.addEventListener("abort", onAbort);
    // Its client gone, the stream is reset (CANCEL), which aborts the call in the daemon
    // (daemon/rpc/connect-unary-route.ts). One already gone was refused before the stream opened.
    if (presence) {
      watched = { abort: finish };
      presence.watch(watched);
    }
    if (timeoutMs !== undefined) timer = setTimeout(() => finish(deadlinePassed()), timeoutMs);
    listen(stream, answer, call.readMaxBytes, finish);
    stream.end(call.body);
  });
}

/** Reads the stream's events into `answer`, and settles the call by `finish` when they tell. */
function listen(
  stream: http2.ClientHttp2Stream,
  answer: Answer,
  readMaxBytes: number,
  finish: (error: Error | undefined) => void,
): void {
  stream.on("response", (received) => {
    answer.status = Number(received[HTTP2_HEADER_STATUS]);
    answer.header = received;
    const length = received[HTTP2_HEADER_CONTENT_LENGTH];
    answer.declaredLength = length === undefined ? undefined : Number(length);
    // The limit guards the gateway against a bad answer: an internal failure, not the caller's.
    if (answer.declaredLength !== undefined && answer.declaredLength > readMaxBytes)
      finish(tooLarge(readMaxBytes));
  });
  stream.on("data", (chunk: Buffer) => {
    // After a failure (too large, aborted) the stream is being closed: nothing more is kept.
    if (answer.settled) return;
    answer.received += chunk.byteLength;
    if (answer.received > readMaxBytes) {
      finish(tooLarge(readMaxBytes));
      return;
    }
    answer.chunks.push(chunk);
  });
  stream.on("end", () => {
    // A stream cut off (reset, connection lost) still ends: only a whole answer counts.
    const cut =
      (stream.rstCode !== undefined && stream.rstCode !== NGHTTP2_NO_ERROR) ||
      (answer.declaredLength !== undefined && answer.declaredLength !== answer.received);
    if (answer.header && !cut) finish(undefined);
    else finish(lost());
  });
  stream.on("error", (error) => {
    if (!answer.header && stream.rstCode === NGHTTP2_REFUSED_STREAM) {
      finish(new Refused("the daemon refused the call unprocessed", { cause: error }));
      return;
    }
    // The daemon holds as many requests as it allows (REQUEST_BUDGET_BYTES): reached, busy.
    if (stream.rstCode === NGHTTP2_ENHANCE_YOUR_CALM) {
      finish(busy());
      return;
    }
    finish(unreachable(error));
  });
  // Settled by then but for a stream closed without an answer: the error (with its stack) is
  // only made for that case, not on every call.
  stream.on("close", () => {
    if (!answer.settled) finish(lost());
  });
}
