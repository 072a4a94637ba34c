import type { Http2ServerResponse, OutgoingHttpHeaders } from "node:http2";

/** Bytes the gRPC protocol sends as they are in `grpc-message`: printable ASCII except "%". */
const PLAIN = /^[\x20-\x24\x26-\x7e]*$/;

/**
 * `grpc-message` as the gRPC protocol percent-encodes it (PROTOCOL-HTTP2, "Status-Message"): the
 * UTF-8 bytes outside printable ASCII, and "%", as %XX; everything else as it is. A space that
 * begins or ends the text is %20 too: an HTTP field value cannot begin or end with one (RFC 9110
 * §5.5), and Node drops such a trailer, so the caller would read no message at all (connect-es
 * ends some of its own, "invalid grpc timeout value: " for an empty grpc-timeout, with a space).
 */
export function percentEncodeGrpcMessage(text: string): string {
  let encoded = "";
  if (PLAIN.test(text)) encoded = text;
  else {
    for (const byte of Buffer.from(text, "utf8")) {
      encoded +=
        byte >= 0x20 && byte <= 0x7e && byte !== 0x25
          ? String.fromCharCode(byte)
          : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    }
  }
  return encoded.replace(/^ +| +$/g, (spaces) => "%20".repeat(spaces.length));
}

/**
 * connect-es writes `grpc-message` with encodeURIComponent, which also escapes ":", ";", "/", "?",
 * "@", "," and the like. A decoder following the protocol reads those escapes back, but grpc-js
 * decodes with decodeURI, which leaves them, so its callers read "read-only%3B use a live key".
 * This re-encodes the trailer of one gRPC (HTTP/2) response the protocol's way, which every
 * decoder reads alike, connect-es' own decodeURIComponent included. gRPC-Web carries its trailers
 * in the body and its clients decode them as connect-es does.
 */
export function encodeGrpcMessageAsProtocolSays(response: Http2ServerResponse): void {
  const addTrailers = response.addTrailers;
  response.addTrailers = (trailers: OutgoingHttpHeaders) => {
    const message = trailers["grpc-message"];
    if (typeof message === "string") {
      try {
        trailers["grpc-message"] = percentEncodeGrpcMessage(decodeURIComponent(message));
      } catch {
        // Not connect-es' encoding after all: sent as it was written.
      }
    }
    addTrailers.call(response, trailers);
  };
}
