import { describe, expect, it } from "vitest";
import { percentEncodeGrpcMessage } from "#daemon/rpc/grpc-message.js";

describe("percentEncodeGrpcMessage", () => {
  it("keeps printable ASCII, punctuation included, as it is", () => {
    const text = "Test keys are read-only; use a live key: /a?b=c&d@e, #f";
    expect(percentEncodeGrpcMessage(text)).toBe(text);
  });

  it("encodes %, controls and the UTF-8 bytes of other text, which decodeURI reads back", () => {
    const text = "100% über\nline";
    const encoded = percentEncodeGrpcMessage(text);
    expect(encoded).toBe("100%25 %C3%BCber%0Aline");
    // grpc-js decodes with decodeURI, connect-es with decodeURIComponent: both read the text.
    expect(decodeURI(encoded)).toBe(text);
    expect(decodeURIComponent(encoded)).toBe(text);
  });

  it("encodes the spaces that begin or end the text, which a header value cannot hold", () => {
    expect(percentEncodeGrpcMessage(" invalid grpc timeout value: ")).toBe(
      "%20invalid grpc timeout value:%20",
    );
    expect(decodeURI(percentEncodeGrpcMessage("über  "))).toBe("über  ");
  });
});
