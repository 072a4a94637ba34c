import { describe, expect, it } from "vitest";
import { generateApiKey, keyHint, parseApiKey, secretHash } from "#daemon/keys/api-key-format.js";

describe("API key format (decisions §2)", () => {
  it("mints ck_<env>_ + 32 base62 characters + a 6-character checksum", () => {
    for (const environment of ["live", "test"] as const) {
      const key = generateApiKey(environment);
      expect(key).toMatch(new RegExp(`^ck_${environment}_[0-9A-Za-z]{38}$`));
      expect(parseApiKey(key)).toBe(environment);
    }
  });

  it("refuses any single-character change, a wrong prefix and a wrong length", () => {
    const key = generateApiKey("live");
    for (let i = 8; i < key.length; i++) {
      const swapped = key[i] === "A" ? "B" : "A";
      expect(parseApiKey(key.slice(0, i) + swapped + key.slice(i + 1))).toBeNull();
    }
    expect(parseApiKey(key.replace("ck_live_", "ck_prod_"))).toBeNull();
    expect(parseApiKey(`${key}0`)).toBeNull();
    expect(parseApiKey(key.slice(0, -1))).toBeNull();
  });

  it("spreads characters over the whole alphabet", () => {
    const seen = new Set(
      Array.from({ length: 200 }, () => generateApiKey("test").slice(8, 40)).join(""),
    );
    expect(seen.size).toBe(62);
  });

  it("stores only a SHA-256 and shows only a hint", () => {
    const key = generateApiKey("live");
    expect(secretHash(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(keyHint(key)).toBe(`ck_live_…${key.slice(-4)}`);
  });
});
