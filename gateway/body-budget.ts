import type { Socket } from "node:net";
import { finished, Transform } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";

/**
 * Request body bytes the gateway holds at once, over all its connections: what they have sent
 * of bodies not yet answered. A body is read whole before the daemon checks its credential (the
 * order of decisions §2), so without a bound many connections each sending up to the 1 MiB cap
 * would make the process hold as much as they care to send.
 */
export const BODY_BUDGET_BYTES = 256 * 1024 * 1024;

/** A body that would take the gateway past its budget: 503, retry shortly (spec 7). */
export class BodyBudgetExceeded extends Error {
  readonly statusCode = 503;
  constructor() {
    super("The service is receiving too much at once; retry shortly");
  }
}

/**
 * A preParsing hook counting every body's bytes as they arrive against `budgetBytes`: one that
 * would pass it fails with BodyBudgetExceeded (nothing of it is relayed), and a body's bytes
 * count until its answer has gone (or its connection has), as the body is held until then. Only
 * bytes received count, so a client that announces a large body and sends slowly holds no more
 * than it sent.
 */
export function bodyBudget(budgetBytes = BODY_BUDGET_BYTES) {
  let held = 0;
  return async (request: FastifyRequest, reply: FastifyReply, payload: NodeJS.ReadableStream) => {
    const { headers } = request;
    if (headers["transfer-encoding"] === undefined && !(Number(headers["content-length"]) > 0)) {
      return payload;
    }
    let mine = 0;
    let released = false;
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        if (released) return callback(null, chunk);
        if (held + chunk.length > budgetBytes) return callback(new BodyBudgetExceeded());
        held += chunk.length;
        mine += chunk.length;
        callback(null, chunk);
      },
    });
    const socket = request.raw.socket;
    const release = () => {
      if (released) return;
      released = true;
      held -= mine;
      closing.get(socket)?.delete(release);
    };
    // Once the answer has gone, or its connection has: a pipelined request queued behind
    // another has an answer that never closes when the connection dies, so the socket says so.
    onSocketClose(socket, release);
    finished(reply.raw, release);
    // An upload cut off fails the body reader; once that reader has let go (a body refused
    // before it was read), nobody else listens, and an unheard error would end the process.
    counted.on("error", () => {});
    payload.once("error", (error) => counted.destroy(error));
    return payload.pipe(counted);
  };
}

/** What to run when each connection closes: one listener per socket, however many requests. */
const closing = new WeakMap<Socket, Set<() => void>>();

function onSocketClose(socket: Socket, run: () => void): void {
  if (socket.destroyed) {
    run();
    return;
  }
  let pending = closing.get(socket);
  if (!pending) {
    const runs = new Set<() => void>();
    pending = runs;
    closing.set(socket, runs);
    socket.once("close", () => {
      for (const each of runs) each();
      closing.delete(socket);
    });
  }
  pending.add(run);
}
