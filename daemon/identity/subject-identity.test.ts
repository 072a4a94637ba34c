import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { parseIdentityKeys, SubjectIdentity } from "#daemon/identity/subject-identity.js";

describe("subject identity hashing (decisions §4)", () => {
  const k1 = randomBytes(32).toString("base64");
  const k2 = randomBytes(32).toString("base64");

  it("hashes under every key, current first, tagged with a stable key id", () => {
    const [one] = parseIdentityKeys(k1);
    const identity = new SubjectIdentity(parseIdentityKeys(`${k2}, ${k1}`));
    const hashes = identity.hashes("team", "banner", "default", "user-1");
    expect(hashes).toHaveLength(2);
    expect(hashes[1]?.startsWith(`${one?.id}:`)).toBe(true);
    expect(
      new SubjectIdentity(parseIdentityKeys(k1)).hashes("team", "banner", "default", "user-1")[0],
    ).toBe(hashes[1]);
    expect(hashes.join()).not.toContain("user-1");
  });

  it("never confuses field boundaries", () => {
    const identity = new SubjectIdentity(parseIdentityKeys(k1));
    expect(identity.hashes("t", "b", "ns", "a:b")).not.toEqual(
      identity.hashes("t", "b", "ns:a", "b"),
    );
  });

  it("refuses malformed keys and reports identity_unavailable without one", () => {
    expect(() => parseIdentityKeys("c2hvcnQ=")).toThrow(/32 bytes/);
    expect(() => parseIdentityKeys(" , ")).toThrow(/empty/);
    expect(() => new SubjectIdentity([]).hashes("t", "b", "n", "s")).toThrow(
      expect.objectContaining({ code: "identity_unavailable" }),
    );
  });
});
