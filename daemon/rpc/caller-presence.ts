import { Code, ConnectError, createContextKey } from "@connectrpc/connect";

/** What a transport ends when the caller leaves: the context of a call in this process, or a stream. */
export interface AbortableCall {
  abort(reason: ConnectError): void;
}

/** Why a call whose caller left was cancelled: a value, so no DOMException or stack is made. */
export const CALLER_LEFT = new ConnectError(
  "the client left before its answer: the call was cancelled",
  Code.Canceled,
);

/**
 * Whether a REST client is still there for the answer of its read, as the gateway knows it: told
 * (leave) when the client's connection closes before its answer was written, it cancels the daemon
 * call under way, and refuses those after. A plain object in a context value, where an
 * AbortController would do: Node 20 makes an AbortSignal in several microseconds, and a listener
 * on it costs about as much again, on every request, for the rare one whose client leaves. The
 * transports (daemon/rpc/in-process-transport.ts, gateway/daemon-transport.ts) watch one call at a
 * time: the gateway's routes make their calls one after another.
 */
export class CallerPresence {
  /** Set once the client has left. */
  left: ConnectError | undefined = undefined;
  private call: AbortableCall | undefined = undefined;

  /** The client has left: the call under way, if any, is aborted. */
  leave(): void {
    if (this.left) return;
    this.left = CALLER_LEFT;
    const call = this.call;
    this.call = undefined;
    call?.abort(CALLER_LEFT);
  }

  /** Aborts `call` when the client leaves; throws at once when it has left already. */
  watch(call: AbortableCall): void {
    if (this.left) throw this.left;
    this.call = call;
  }

  /** `call` has settled: the client's leaving no longer concerns it. */
  unwatch(call: AbortableCall): void {
    if (this.call === call) this.call = undefined;
  }
}

/**
 * The presence of the REST client a gateway relays a read for (CallerPresence): set by
 * gateway/relay.ts on calls whose cancellation undoes nothing. Writes carry none: a write whose
 * request has arrived whole is carried out even if its client leaves (a beacon from a closing tab).
 */
export const kCallerPresence = createContextKey<CallerPresence | undefined>(undefined, {
  description: "the REST client's presence",
});
