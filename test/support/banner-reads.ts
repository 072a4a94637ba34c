import type { Transport } from "@connectrpc/connect";

/**
 * `transport`, telling `onBannerRead` each time the loader reads a banner from the daemon
 * (GetPublishedBanner), once the call is under way, with the call's outcome to come: the
 * daemon's answer, or failure, is the transport's own.
 */
export function watchingBannerReads(
  transport: Transport,
  onBannerRead: (answer: Promise<unknown>) => void,
): Transport {
  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      const answer = transport.unary(method, signal, timeoutMs, header, input, contextValues);
      if (method.name === "GetPublishedBanner") onBannerRead(answer);
      return answer;
    },
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      transport.stream(method, signal, timeoutMs, header, input, contextValues),
  };
}
