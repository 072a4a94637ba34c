import cluster from "node:cluster";

/** The message a worker sends its primary, and the primary relays, when a banner's public side changed. */
interface PublicChangeMessage {
  consentPublicChange: string;
}

export function isPublicChange(message: unknown): message is PublicChangeMessage {
  return (
    typeof message === "object" &&
    message !== null &&
    typeof (message as PublicChangeMessage).consentPublicChange === "string"
  );
}

/**
 * In a worker of `npm start`: a subscription to banner publishes and edits made by this worker's
 * daemon and by every other worker's, so each worker's loader drops a changed banner at once
 * (decisions §6) instead of after its cache bound. Local changes go to the primary, which relays
 * them to the other workers; relayed changes reach the listeners without going back out.
 */
export function workerPublicChanges(
  subscribeLocal: (listener: (publicId: string) => void) => void,
): (listener: (publicId: string) => void) => void {
  if (!cluster.isWorker) return subscribeLocal;
  const listeners: ((publicId: string) => void)[] = [];
  subscribeLocal((publicId) => {
    process.send?.({ consentPublicChange: publicId } satisfies PublicChangeMessage);
  });
  process.on("message", (message) => {
    if (!isPublicChange(message)) return;
    for (const listener of listeners) listener(message.consentPublicChange);
  });
  return (listener) => {
    listeners.push(listener);
    subscribeLocal(listener);
  };
}
