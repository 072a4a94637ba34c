import { describe, expect, it } from "vitest";
import { toJson } from "./state.js";

describe("toJson: the runtime's own JSON writer", () => {
  const values: unknown[] = [
    "plain",
    'quote " backslash \\ slash /',
    "controls \u0000\u0001\b\f\n\r\t\u001f and \u007f\u2028\u2029",
    "emoji 😀 kept as a pair",
    "lone \ud800 high, lone \udfff low, reversed \udc00\ud800",
    0,
    -0,
    1.5,
    1e21,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    true,
    false,
    null,
    [1, undefined, () => 1, "x"],
    { a: 1, skipped: undefined, fn: () => 1, nested: { list: [{ b: null }] } },
    { at: new Date(Date.UTC(2026, 10, 28, 4, 5, 6, 789)), invalid: new Date(Number.NaN) },
    {
      schemaVersion: 2,
      categories: ["necessary", "analytics"],
      revision: 3,
      acceptType: "custom",
      consentId: "0b7c3a3e-6f1e-4a8e-9c55-8f1b2a3c4d5e",
      consentTimestamp: "2026-11-28T04:05:06.789Z",
      lastConsentTimestamp: "2026-11-28T04:05:06.789Z",
      languageCode: "de",
      usOptOutChoices: { saleSharing: false },
    },
  ];

  it("reads back as JSON.stringify's text does, for every kind of value a state or row holds", () => {
    for (const value of values) {
      const text = toJson(value);
      expect([value, JSON.parse(text as string)]).toEqual([
        value,
        JSON.parse(JSON.stringify(value)),
      ]);
    }
    expect(toJson(undefined)).toBeUndefined();
    expect(toJson(() => 1)).toBeUndefined();
  });

  it("escapes lone surrogates, so the cookie's encodeURIComponent takes any state", () => {
    const text = toJson({ categories: ["a\ud800", "\udc00b", "ok 😀"] }) as string;
    expect(() => encodeURIComponent(text)).not.toThrow();
    expect(text).toContain("a\\ud800");
    expect(text).toContain("\\udc00b");
    expect(text).toContain("ok 😀");
  });

  it("reads no toJSON a page gave arrays or objects (Prototype.js's Array#toJSON)", () => {
    const list = ["a", "b"] as string[] & { toJSON?: () => string };
    list.toJSON = () => '["a","b"]';
    expect(toJson({ categories: list })).toBe('{"categories":["a","b"]}');
  });
});
