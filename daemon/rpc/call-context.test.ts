import { describe, expect, it } from "vitest";
import { CallerHeaders } from "#daemon/auth/caller.js";
import { type HeaderName, PlainCallContext, requestHeaderValue } from "#daemon/rpc/call-context.js";
import { Health } from "#gen/grpc/health/v1/health_pb.js";
import { headerRecord } from "#test/support/consent-log.js";

const contextOf = (requestHeader: HeadersInit | undefined) =>
  new PlainCallContext({
    service: Health,
    method: Health.method.check,
    protocolName: "connect",
    requestMethod: "POST",
    url: "in-process://consentd/grpc.health.v1.Health/Check",
    requestHeader,
    contextValues: undefined,
  });

const NAMES: HeaderName[] = [
  "authorization",
  "consent-team",
  "consent-origin",
  "__proto__",
  "constructor",
  "x-empty",
  "absent",
];

describe("a call's context (daemon/rpc/call-context.ts)", () => {
  it.each([
    ["no header at all", undefined],
    ["a record in lower case", { authorization: "Bearer k1", "consent-team": "t1" }],
    [
      "names in capitals",
      { Authorization: "Bearer k1", "Consent-Team": "t1", "consent-team": "t2" },
    ],
    ["values Headers trims", { authorization: " Bearer k1\t", "consent-team": "\tt1 " }],
    [
      "inner blanks and Latin-1",
      { authorization: "Bearer  k1", "consent-origin": "https://ä.example" },
    ],
    ["a name __proto__ and an empty value", JSON.parse('{"__proto__": "p", "x-empty": ""}')],
    [
      "pairs",
      [
        ["authorization", "Bearer k1"],
        ["Authorization", "Bearer k2"],
      ],
    ],
    ["a Headers", new Headers({ authorization: "Bearer k1" })],
  ] as [string, HeadersInit | undefined][])("reads %s as Headers does", (_case, init) => {
    const expected = new Headers(init);
    const read = contextOf(init);
    for (const name of NAMES) {
      expect(requestHeaderValue(read, name)).toBe(expected.get(name));
    }
    expect(headerRecord(contextOf(init).requestHeader)).toEqual(headerRecord(expected));
  });

  it("reads every header the daemon reads of a caller, by the names it reads them by, as Headers does; a name in capitals does not compile", () => {
    const init = {
      authorization: "Bearer k1",
      "consent-session": "s1",
      "consent-origin": "https://a.example",
      "consent-team": "t1",
      "consent-client-ip": "203.0.113.7",
      "consent-gateway-token": "g1",
    };
    const ctx = contextOf(init);
    for (const name of Object.values(CallerHeaders)) {
      expect([name, requestHeaderValue(ctx, name)]).toEqual([name, new Headers(init).get(name)]);
    }
    // Such a call would read no header, without a word (the record is read by the name as it
    // is): `npx tsc --noEmit -p .` refuses it, and fails on this line once it would compile.
    // @ts-expect-error a header name in capitals is no HeaderName
    expect(requestHeaderValue(ctx, "Authorization")).toBeNull();
  });

  it("reads a header a handler changed as its Headers now holds it", () => {
    const ctx = contextOf({ authorization: "Bearer k1" });
    ctx.requestHeader.set("authorization", "Bearer k2");
    ctx.requestHeader.append("consent-team", "t1");
    expect(requestHeaderValue(ctx, "authorization")).toBe("Bearer k2");
    expect(requestHeaderValue(ctx, "consent-team")).toBe("t1");
    expect(ctx.requestHeader).toBe(ctx.requestHeader);
  });

  it("keeps what the caller sent, whatever the caller does with its record afterwards", () => {
    const record: Record<string, string> = { authorization: "Bearer k1" };
    const ctx = contextOf(record);
    record.authorization = "Bearer k2";
    expect(requestHeaderValue(ctx, "authorization")).toBe("Bearer k1");
    expect(ctx.requestHeader.get("authorization")).toBe("Bearer k1");
  });

  it.each([
    ["a value with a line break", { authorization: "Bearer a\r\nb" }],
    ["a value past Latin-1", { authorization: "Bearer \u0100" }],
    ["a name that is no token", { "consent team": "t1" }],
  ] as [string, HeadersInit][])("refuses %s at once, as Headers does", (_case, init) => {
    const refusal = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        return error;
      }
      return undefined;
    };
    const expected = refusal(() => new Headers(init));
    expect(expected).toBeInstanceOf(TypeError);
    expect(refusal(() => contextOf(init))).toEqual(expected);
  });
});
