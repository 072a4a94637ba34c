import cluster from "node:cluster";
import type { Daemon } from "#daemon/server.js";
import type { Store } from "#daemon/store/store.js";

/** The message a worker sends its primary, and the primary relays, when a banner's public side changed. */
interface PublicChangeMessage {
  consentPublicChange: string;
}

/** A field of a message between primary and workers, if the message is an object. */
function fieldOf(message: unknown, name: string): unknown {
  return typeof message === "object" && message !== null
    ? (message as Record<string, unknown>)[name]
    : undefined;
}

export function isPublicChange(message: unknown): message is PublicChangeMessage {
  return typeof fieldOf(message, "consentPublicChange") === "string";
}

/**
 * In a worker of `npm start`: a subscription to banner publishes and edits made by this worker's
 * daemon and by every other worker's, so each worker's loader drops a changed banner at once
 * (decisions §6) instead of after its cache bound. Local changes go to the primary, which relays
 * them to the other workers; a relayed change first drops the daemon's cached reads (the loader's
 * next read must not be served the record the change replaced), then reaches the listeners
 * without going back out.
 */
export function workerPublicChanges(
  daemon: Pick<Daemon, "onPublicChange" | "forgetCachedReads">,
): (listener: (publicId: string) => void) => void {
  const subscribeLocal = (listener: (publicId: string) => void) => daemon.onPublicChange(listener);
  if (!cluster.isWorker) return subscribeLocal;
  const listeners: ((publicId: string) => void)[] = [];
  subscribeLocal((publicId) => {
    // A relay lost to a closing channel (the service stopping) is not an error: the other
    // loaders still refresh within their bound. With a callback, send() reports, never throws.
    process.send?.(
      { consentPublicChange: publicId } satisfies PublicChangeMessage,
      ignoreSendError,
    );
  });
  process.on("message", (message) => {
    if (!isPublicChange(message)) return;
    daemon.forgetCachedReads();
    for (const listener of listeners) listener(message.consentPublicChange);
  });
  return (listener) => {
    listeners.push(listener);
    subscribeLocal(listener);
  };
}

/** The message a worker sends its primary, and the primary relays, when its store met damage. */
interface StoreDamageMessage {
  consentStoreDamage: string;
}

export function isStoreDamage(message: unknown): message is StoreDamageMessage {
  return typeof fieldOf(message, "consentStoreDamage") === "string";
}

/** The message a worker sends its primary, and the primary relays, when it wrote a cached record. */
interface CachedWriteMessage {
  consentCachedWrite: true;
}

export function isCachedWrite(message: unknown): message is CachedWriteMessage {
  return fieldOf(message, "consentCachedWrite") === true;
}

/**
 * In a worker of `npm start`: a write of a key, team or banner this worker's daemon made reaches
 * the other workers (through the primary), whose daemons then drop their cached reads (`forget`),
 * and theirs reach this one: a key revoked through one worker is refused by all of them once the
 * revocation is stored, a plan change applies on all of them, instead of within the caches' bound
 * (read-cache.ts; docs/behaviour.md, "Caching"). Returns what to call after each such write.
 */
export function workerCachedWrites(forget: () => void): () => void {
  if (!cluster.isWorker) return () => {};
  process.on("message", (message) => {
    if (isCachedWrite(message)) forget();
  });
  return () =>
    process.send?.({ consentCachedWrite: true } satisfies CachedWriteMessage, ignoreSendError);
}

/** Whether the primary passes the message on to every other worker. */
export const isRelayed = (message: unknown) =>
  isPublicChange(message) || isStoreDamage(message) || isCachedWrite(message);

/**
 * In a worker of `npm start`: damage this worker's store met goes to the other workers (through
 * the primary), and theirs comes to this one, so every worker's health reports it, whichever
 * worker a health check reaches. Returns what to call with this worker's own.
 */
export function workerStoreDamage(store: Pick<Store, "reportDamage">): (reason: string) => void {
  if (!cluster.isWorker) return () => {};
  process.on("message", (message) => {
    if (isStoreDamage(message)) store.reportDamage(message.consentStoreDamage);
  });
  return (reason) =>
    process.send?.({ consentStoreDamage: reason } satisfies StoreDamageMessage, ignoreSendError);
}

/** The message a worker sends its primary every heartbeat interval while its event loop runs. */
interface HeartbeatMessage {
  consentAlive: true;
}

export function isHeartbeat(message: unknown): message is HeartbeatMessage {
  return fieldOf(message, "consentAlive") === true;
}

/**
 * In a worker of `npm start`: tells the primary every `intervalMs` that this worker's event loop
 * still runs. A worker that stops answering (a loop that never yields, a process stuck in its
 * exit) falls silent, and the primary stops the service (daemon/workers.ts). The timer never keeps
 * the worker alive on its own.
 */
export function beatForPrimary(intervalMs: number): void {
  const beat = () =>
    process.send?.({ consentAlive: true } satisfies HeartbeatMessage, ignoreSendError);
  beat();
  setInterval(beat, intervalMs).unref();
}

/** For send()'s callback: a message that could not be sent is dropped (see the callers). */
export function ignoreSendError(): void {}

/** The message a worker sends its primary when it cannot start, worded for the operator. */
interface StartupFailureMessage {
  consentStartupFailure: string;
}

export function isStartupFailure(message: unknown): message is StartupFailureMessage {
  return typeof fieldOf(message, "consentStartupFailure") === "string";
}

/**
 * In a worker of `npm start`: hands a start-up failure the operator can fix (a taken port, a data
 * directory it may not write) to the primary, which prints the first one only: every worker meets
 * the same failure, and one line says it. Resolves once the message is sent or cannot be.
 */
export function reportStartupFailure(message: string): Promise<void> {
  return new Promise((resolve) => {
    // send() may queue the message (and return false); its callback runs once it is sent or
    // cannot be, so the worker exits only after that.
    if (!process.send) resolve();
    else
      process.send({ consentStartupFailure: message } satisfies StartupFailureMessage, () =>
        resolve(),
      );
  });
}
